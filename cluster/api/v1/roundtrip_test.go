package v1_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// TestRoundTrip decodes KubeVirt-style manifests strictly into our types and
// encodes them again: no field may be unknown, and none may be lost.
func TestRoundTrip(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			obj := newObject(t, js)
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			if err := dec.Decode(obj); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(t, js), normalize(t, out)); diff != "" {
				t.Errorf("round trip changed the manifest (-in +out):\n%s", diff)
			}
		})
	}
}

func newObject(t *testing.T, js []byte) runtime.Object {
	t.Helper()
	var meta struct{ Kind string }
	if err := json.Unmarshal(js, &meta); err != nil {
		t.Fatal(err)
	}
	switch meta.Kind {
	case "VirtualMachine":
		return &v1.VirtualMachine{}
	case "VirtualMachineInstance":
		return &v1.VirtualMachineInstance{}
	case "VirtualMachineInstanceMigration":
		return &v1.VirtualMachineInstanceMigration{}
	}
	t.Fatalf("unknown kind %q", meta.Kind)
	return nil
}

// normalize decodes JSON and drops zero values (null, false, "", {}, []),
// which encoding may legitimately add or omit.
func normalize(t *testing.T, js []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	v, _ = dropZero(v)
	return v
}

func dropZero(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case bool:
		return x, x
	case string:
		return x, x != ""
	case map[string]any:
		for k, e := range x {
			if e, keep := dropZero(e); keep {
				x[k] = e
			} else {
				delete(x, k)
			}
		}
		return x, len(x) > 0
	case []any:
		var out []any
		for _, e := range x {
			if e, keep := dropZero(e); keep {
				out = append(out, e)
			}
		}
		return out, len(out) > 0
	}
	return v, true
}
