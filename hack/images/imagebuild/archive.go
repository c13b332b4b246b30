package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index entry. containerd names the imported image after
// io.containerd.image.name; the OCI ref name is the tag, as the spec says.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// writeArchive writes img as an OCI image-layout tarball at file, naming it
// ref. It writes a temporary file and renames it, so a reader never sees a
// partial archive.
func writeArchive(file, ref string, img v1.Image) (err error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("reference %q: %w", ref, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create archive for %s: %w", ref, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	tw := tar.NewWriter(tmp)
	if err := writeImageBlobs(tw, img); err != nil {
		return fmt.Errorf("archive %s: %w", ref, err)
	}
	if err := writeIndex(tw, img, tag); err != nil {
		return fmt.Errorf("archive %s: %w", ref, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", ref, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", ref, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("archive %s: %w", ref, err)
	}
	return os.Rename(tmp.Name(), file)
}

// writeImageBlobs writes the layers, config and manifest under blobs/.
func writeImageBlobs(tw *tar.Writer, img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("layer %s size: %w", d, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		err = writeBlob(tw, d, size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("config digest: %w", err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := writeBytes(tw, blobPath(cfgName), cfg); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("manifest digest: %w", err)
	}
	m, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return writeBytes(tw, blobPath(d), m)
}

// writeIndex writes oci-layout and index.json naming the image tag.
func writeIndex(tw *tar.Writer, img v1.Image, tag name.Tag) error {
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("manifest digest: %w", err)
	}
	size, err := img.Size()
	if err != nil {
		return fmt.Errorf("manifest size: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("media type: %w", err)
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt, Digest: d, Size: size,
			Annotations: map[string]string{annotationImageName: tag.Name(), annotationRefName: tag.TagStr()},
		}},
	}
	raw, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if err := writeBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	return writeBytes(tw, "index.json", raw)
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

func writeBytes(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch(), Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := tw.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func writeBlob(tw *tar.Writer, h v1.Hash, size int64, r io.Reader) error {
	p := blobPath(h)
	if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: size, ModTime: epoch(), Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := io.CopyN(tw, r, size); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// extractArchive unpacks an archive written by writeArchive into dir.
func extractArchive(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("open archive %q: %w", file, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive %q: %w", file, err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			return fmt.Errorf("archive %q: unexpected entry %q", file, h.Name)
		}
		dst := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("extract %q: %w", h.Name, err)
		}
		out, err := os.Create(dst)
		if err != nil {
			return fmt.Errorf("extract %q: %w", h.Name, err)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("extract %q: %w", h.Name, err)
		}
	}
}
