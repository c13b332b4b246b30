// Command manifests renders the operator's component manifests: for each
// component of cluster/operator.Components, the files its
// deploy/<component>/kustomization.yaml lists under resources,
// concatenated in that order into <out>/<component>.yaml. Those
// kustomizations are plain lists (anything else in one is an error, so a
// kustomize feature can never be dropped silently); deploy/base and the
// overlays stay kustomize trees for kubectl apply -k.
//
//	manifests -deploy deploy -out _output/manifests
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/cluster/operator"
)

func main() {
	deploy := flag.String("deploy", "deploy", "the deploy/ directory")
	out := flag.String("out", "_output/manifests", "output directory")
	flag.Parse()
	if err := render(*deploy, *out); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

// kustomization is the part of a kustomization.yaml this tool supports.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

func render(deploy, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, c := range operator.Components {
		dir := filepath.Join(deploy, c.Name)
		k, err := readKustomization(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "# Component %s, rendered from deploy/%s by hack/manifests; do not edit.\n", c.Name, c.Name)
		for _, r := range k.Resources {
			b, err := os.ReadFile(filepath.Join(dir, r))
			if err != nil {
				return fmt.Errorf("component %s: %w", c.Name, err)
			}
			buf.WriteString("---\n")
			buf.Write(bytes.TrimRight(b, "\n"))
			buf.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(out, c.File()), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readKustomization reads path and refuses any key but apiVersion, kind
// and resources, and any resource that is a directory.
func readKustomization(path string) (kustomization, error) {
	var k kustomization
	b, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	var keys map[string]any
	if err := yaml.Unmarshal(b, &keys); err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	for key := range keys {
		if !slices.Contains([]string{"apiVersion", "kind", "resources"}, key) {
			return k, fmt.Errorf("%s: %q is not supported (a component's kustomization only lists resources)", path, key)
		}
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range k.Resources {
		st, err := os.Stat(filepath.Join(filepath.Dir(path), r))
		if err != nil {
			return k, fmt.Errorf("%s: %w", path, err)
		}
		if st.IsDir() {
			return k, fmt.Errorf("%s: resource %s is a directory (not supported)", path, r)
		}
	}
	return k, nil
}
