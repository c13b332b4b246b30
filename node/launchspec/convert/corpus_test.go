package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// Hostile values the corpus puts into every field: shell and QEMU
// metacharacters, unicode (a right-to-left override, a NUL), a long
// string, and numbers out of every range.
var (
	hostileStrings = map[string]string{
		"shell":   "$(reboot)`id`;|&<>*?'\"\\ ,id=evil,,x=y -device virtio-net -S\n-drive file=/etc/shadow",
		"unicode": "ünïcødé-\u202e☃-\u0000-𝔁",
		"long":    strings.Repeat("a", 64<<10),
		"empty":   "",
		"path":    "../../../../etc/passwd",
	}
	hostileNumbers = map[string]any{
		"huge":     int64(1) << 62,
		"negative": -1,
		"fraction": 1.5,
	}
)

// outcome is where a mutated VMI ended.
type outcome string

const (
	refusedNamed   outcome = "refused at admission, field named"
	refusedUnnamed outcome = "refused at admission, field NOT named"
	serverError    outcome = "server error"
	nodeRefused    outcome = "accepted, refused by the node's conversion with the field named"
	nodeUnnamed    outcome = "accepted, refused by the node's conversion, field NOT named"
	builtClean     outcome = "accepted and built, argv clean"
	injected       outcome = "accepted and built, argv INJECTED"
)

// bad outcomes fail the test.
var bad = map[outcome]bool{refusedUnnamed: true, serverError: true, nodeUnnamed: true, injected: true}

// TestHostileCorpus sends every VMI of testdata/*.vmi.yaml, mutated at each
// spec field (wrong JSON type, hostile strings, out-of-range numbers, an
// unknown key in every object), to a real kube-apiserver with nodevirt's
// CRDs (server-side dry run, strict field validation, as kubectl apply);
// whatever admission accepts goes through Build, as the node would. Each
// mutation must end refused with its field named — by admission or by
// Build — or built into an argv in which every string is escaped (checkArgv).
// The counts per outcome are logged.
func TestHostileCorpus(t *testing.T) {
	env := apiserver.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "hostile"
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmis := dyn.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}).Namespace(ns)

	files, err := filepath.Glob(filepath.Join("testdata", "*.vmi.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/*.vmi.yaml: %v (%d files)", err, len(files))
	}
	counts := map[outcome]int{}
	var failures, reached []string
	used := 0
	for _, f := range files {
		base := loadObject(t, f)
		if o, detail := try(t.Context(), vmis, ns, mutation{path: "spec", kind: "none", obj: base}); o != builtClean {
			t.Logf("%s is no base: unmutated it ends %s (%s)", filepath.Base(f), o, detail)
			continue
		}
		used++
		for _, m := range mutations(base) {
			o, detail := try(t.Context(), vmis, ns, m)
			counts[o]++
			if o == builtClean || o == nodeRefused {
				reached = append(reached, fmt.Sprintf("%s %s (%s): %s", filepath.Base(f), m.path, m.kind, o))
			}
			if bad[o] && len(failures) < 40 {
				failures = append(failures, fmt.Sprintf("%s %s (%s): %s: %s", filepath.Base(f), m.path, m.kind, o, detail))
			}
		}
	}
	var b strings.Builder
	total := 0
	for _, o := range []outcome{refusedNamed, nodeRefused, builtClean, refusedUnnamed, serverError, nodeUnnamed, injected} {
		fmt.Fprintf(&b, "  %-70s %5d\n", o, counts[o])
		total += counts[o]
	}
	t.Logf("hostile corpus: %d mutations of %d VMIs:\n%s", total, used, b.String())
	t.Logf("admitted, so reaching the node:\n  %s", strings.Join(reached, "\n  "))
	for _, f := range failures {
		t.Error(f)
	}
	if used < 3 || counts[builtClean] == 0 || counts[refusedNamed] == 0 {
		t.Errorf("the corpus exercised neither Build nor admission: %v", counts)
	}
}

// mutation is one hostile variant of a VMI.
type mutation struct {
	path string // the field, as the API server names it: spec.domain.devices.disks[0].name
	kind string // what was done to it
	obj  map[string]any
}

// mutations lists the hostile variants of base, one per field and kind.
func mutations(base map[string]any) []mutation {
	var out []mutation
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		p := fieldPath(path)
		add := func(kind string, val any) {
			obj := deepCopy(base)
			set(obj, path, val)
			out = append(out, mutation{path: p, kind: kind, obj: obj})
		}
		switch x := v.(type) {
		case map[string]any:
			add("object as a string", "not-an-object")
			add("unknown key", mergeKey(x, "nodevirtHostile", 1))
			for _, k := range sortedKeys(x) {
				walk(append(slices.Clone(path), k), x[k])
			}
		case []any:
			add("array as an object", map[string]any{"x": 1})
			for i, e := range x {
				walk(append(slices.Clone(path), "["+strconv.Itoa(i)+"]"), e)
			}
		case string:
			add("string as a number", 42)
			for _, k := range sortedKeys(hostileStrings) {
				add(k+" string", hostileStrings[k])
			}
		case bool:
			add("bool as a string", "yes")
		case int64, float64, int:
			add("number as a string", "forty-two")
			for _, k := range sortedKeys(hostileNumbers) {
				add(k+" number", hostileNumbers[k])
			}
		}
	}
	walk([]string{"spec"}, base["spec"])
	return out
}

// try sends m to the API server (dry run) and, if admitted, through Build.
func try(ctx context.Context, vmis dynamic.ResourceInterface, ns string, m mutation) (outcome, string) {
	obj := &unstructured.Unstructured{Object: m.obj}
	obj.SetNamespace(ns)
	got, err := vmis.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			if names(err.Error(), m.path) {
				return refusedNamed, ""
			}
			return refusedUnnamed, firstLine(err.Error())
		}
		return serverError, err.Error()
	}
	var vmi v1.VirtualMachineInstance
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &vmi); err != nil {
		return serverError, "decode the admitted object: " + err.Error()
	}
	if vmi.UID == "" {
		vmi.UID = "6a1e2c5e-7d0b-4f59-9a57-0d3c1f7c2b11" // a dry run assigns none
	}
	for _, node := range []NodeFacts{tcgNode, kvmNode} {
		spec, err := Build(Input{VMI: &vmi, Node: node, AllowEmulation: true, Paths: launchspec.DefaultPaths(),
			Interfaces: []NIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}})
		if err != nil {
			if strings.Contains(err.Error(), "spec.") || errors.Is(err, ErrNoAccelerator) {
				return nodeRefused, ""
			}
			return nodeUnnamed, err.Error()
		}
		if err := checkArgv(spec.Args); err != nil {
			return injected, err.Error()
		}
		if err := spec.Verify(); err != nil {
			return injected, "spec does not verify: " + err.Error()
		}
	}
	return builtClean, ""
}

// names reports whether an API server error names the field at path
// (spec.a.b[0].c), or, for an unnamed array item, its array.
func names(msg, path string) bool {
	if strings.Contains(msg, path) {
		return true
	}
	// Structural errors of an array item may name the array.
	if i := strings.LastIndex(path, "["); i > 0 && strings.Contains(msg, path[:i]) {
		return true
	}
	// CEL rules name their own field, at the object the rule is on.
	parent := path
	for {
		i := strings.LastIndexAny(parent, ".[")
		if i <= 0 {
			return false
		}
		parent = parent[:i]
		if strings.Contains(msg, parent+":") || strings.Contains(msg, parent+" ") {
			return strings.Contains(msg, lastKey(path))
		}
	}
}

func lastKey(path string) string {
	i := strings.LastIndexAny(path, ".[")
	return strings.TrimSuffix(path[i+1:], "]")
}

// fieldPath spells path as the API server does: spec.a.b[0].c.
func fieldPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// set replaces the value at path in obj.
func set(obj map[string]any, path []string, val any) {
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		if strings.HasPrefix(p, "[") {
			n, _ := strconv.Atoi(strings.Trim(p, "[]"))
			arr := cur.([]any)
			if last {
				arr[n] = val
				return
			}
			cur = arr[n]
			continue
		}
		m := cur.(map[string]any)
		if last {
			m[p] = val
			return
		}
		cur = m[p]
	}
}

func mergeKey(m map[string]any, k string, v any) map[string]any {
	out := deepCopy(m)
	out[k] = v
	return out
}

func deepCopy(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// loadObject reads a VMI manifest as a JSON object.
func loadObject(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	md, _ := obj["metadata"].(map[string]any)
	delete(md, "uid")
	delete(md, "namespace")
	return obj
}
