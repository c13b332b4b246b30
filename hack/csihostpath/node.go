package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// node is the CSI Node service: it publishes a volume at the kubelet's
// target path, a bind mount of the volume's directory (Filesystem) or of a
// loop device over its disk file (Block). No staging.
type node struct {
	csi.UnimplementedNodeServer
	id  string
	st  store
	ns  *mountNS // where the mounts are made (nil: this process's namespace)
	log *slog.Logger

	mu sync.Mutex
}

// published records what a Block publish attached
// (nodes/<node>/published/<hash of target>.json).
type published struct {
	Target string `json:"target"`
	Volume string `json:"volumeId"`
	Loop   string `json:"loop,omitempty"`
	File   string `json:"file,omitempty"`
}

func (n *node) recordPath(target string) string {
	return filepath.Join(n.st.root, "nodes", n.id, "published", idOf("pub", target)+".json")
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.id}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (n *node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id: empty")
	case target == "" || !filepath.IsAbs(target):
		return nil, status.Errorf(codes.InvalidArgument, "target_path %q: want an absolute path", target)
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability: unset")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, err := n.st.volume(req.GetVolumeId())
	if errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	block := req.GetVolumeCapability().GetBlock() != nil
	if block != v.Block {
		return nil, status.Errorf(codes.InvalidArgument, "volume_capability: block %t, volume %s is block %t", block, v.ID, v.Block)
	}
	ro := req.GetReadonly()
	src := dataPath(n.st.volumeDir(v.ID), v.Block)
	already := false
	err = n.ns.do(func() error {
		mounted, err := isMountPoint(target)
		if err != nil || mounted {
			already = mounted
			return err
		}
		if block {
			return n.publishBlock(v, src, target, ro)
		}
		if err := os.MkdirAll(target, 0o750); err != nil {
			return err
		}
		return bindMount(src, target, ro)
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "publish volume %s at %s: %v", v.ID, target, err)
	}
	if already {
		return &csi.NodePublishVolumeResponse{}, nil // published already
	}
	n.log.Info("volume published", "id", v.ID, "target", target, "block", block, "readonly", ro)
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishBlock binds a loop device over file to target (a file the
// kubelet's parent directory holds), recording the device first so an
// unpublish after a crash still detaches it.
func (n *node) publishBlock(v volume, file, target string, ro bool) error {
	dev, err := attachLoop(file, ro)
	if err != nil {
		return err
	}
	rec := published{Target: target, Volume: v.ID, Loop: dev, File: file}
	if err := os.MkdirAll(filepath.Dir(n.recordPath(target)), 0o755); err != nil {
		_ = detachLoop(dev, file)
		return err
	}
	if err := writeJSON(n.recordPath(target), rec); err != nil {
		_ = detachLoop(dev, file)
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDWR, 0o660)
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = bindMount(dev, target, ro)
	}
	if err != nil {
		_ = detachLoop(dev, file)
		_ = os.Remove(n.recordPath(target))
		return err
	}
	return nil
}

func (n *node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if req.GetVolumeId() == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.ns.do(func() error {
		for {
			mounted, err := isMountPoint(target)
			if err != nil {
				return err
			}
			if !mounted {
				break
			}
			if err := unix.Unmount(target, 0); err != nil {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
		}
		var rec published
		switch err := readJSON(n.recordPath(target), &rec); {
		case err == nil:
			if err := detachLoop(rec.Loop, rec.File); err != nil {
				return fmt.Errorf("detach %s: %w", rec.Loop, err)
			}
			if err := os.Remove(n.recordPath(target)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case !errors.Is(err, errNotFound):
			return err
		}
		if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", target, err)
		}
		return nil
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "unpublish volume %s at %s: %v", req.GetVolumeId(), target, err)
	}
	n.log.Info("volume unpublished", "id", req.GetVolumeId(), "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// bindMount bind-mounts src on target, read-only when ro (a bind mount
// takes MS_RDONLY only on a remount).
func bindMount(src, target string, ro bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// isMountPoint reports whether path is a mount point in the calling
// thread's mount namespace (/proc/thread-self/mountinfo, field 5, octal
// escapes undone).
func isMountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	path = filepath.Clean(path)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	v := 0
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}
