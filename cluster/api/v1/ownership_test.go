package v1_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var allPhases = []v1.VirtualMachineInstancePhase{v1.VmPhaseUnset, v1.Pending, v1.Scheduling, v1.Scheduled, v1.Running, v1.Unknown, v1.Succeeded, v1.Failed}

// The CRD's transition rule is the one the Go table yields, in every served
// version: the marker cannot drift from phaseTransitions unnoticed.
func TestPhaseTransitionRule_MatchesCRD(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "crds", "kubevirt.io_virtualmachineinstances.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	want := apiextensionsv1.ValidationRule{
		Rule: v1.PhaseTransitionRule(), MessageExpression: v1.PhaseTransitionMessage(),
		FieldPath: ".status.phase", Reason: ptrTo(apiextensionsv1.FieldValueForbidden),
	}
	for _, ver := range crd.Spec.Versions {
		status := ver.Schema.OpenAPIV3Schema.Properties["status"]
		var got []apiextensionsv1.ValidationRule
		for _, r := range ver.Schema.OpenAPIV3Schema.XValidations {
			if strings.Contains(r.Rule, "oldSelf.status.phase") {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff([]apiextensionsv1.ValidationRule{want}, got); diff != "" {
			t.Errorf("%s: status.phase transition rule (-from Go table +in CRD):\n%s", ver.Name, diff)
		}
		for _, list := range []string{"conditions", "phaseTransitionTimestamps"} {
			if lt := status.Properties[list].XListType; lt == nil || *lt != "map" {
				t.Errorf("%s: status.%s is not a map list", ver.Name, list)
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestOwnership_OwnedByAgentAgreesWithTable(t *testing.T) {
	for _, p := range allPhases {
		writer := v1.PhaseWriter(p)
		wantWriter := v1.ManagerController
		switch p {
		case v1.Scheduled, v1.Running, v1.Unknown, v1.Succeeded, v1.Failed:
			wantWriter = v1.ManagerAgent
		}
		if writer != wantWriter {
			t.Errorf("PhaseWriter(%q) = %q, want %q", p, writer, wantWriter)
		}
		if got := p.OwnedByAgent(); got != (writer == v1.ManagerAgent) {
			t.Errorf("%q.OwnedByAgent() = %v, table says writer %q", p, got, writer)
		}
	}
}

// One usual writer per field and phase; the only exception is the node
// controller's, and it only ever writes Failed-related fields. A queue
// (see TestOwnership_Queues) is one list with several writers.
func TestOwnership_OneWriterPerField(t *testing.T) {
	type key struct{ kind, path string }
	seen := map[key]map[v1.VirtualMachineInstancePhase]string{}
	for _, f := range v1.StatusOwnership() {
		if f.Exception {
			if f.Writer != v1.ManagerNodeController {
				t.Errorf("%s %s: exception by %s, only %s has one", f.Kind, f.Path, f.Writer, v1.ManagerNodeController)
			}
			continue
		}
		if f.Future || f.Queue != "" || f.Takeover {
			continue
		}
		k := key{f.Kind, f.Path}
		if seen[k] == nil {
			seen[k] = map[v1.VirtualMachineInstancePhase]string{}
		}
		phases := f.While
		if len(phases) == 0 {
			phases = []v1.VirtualMachineInstancePhase{"*"}
		}
		for _, p := range phases {
			if w, ok := seen[k][p]; ok {
				t.Errorf("%s %s in phase %q: written by %s and %s", f.Kind, f.Path, p, w, f.Writer)
			}
			seen[k][p] = f.Writer
		}
	}
	// A takeover row is the agent writing, with the value it read, a
	// field the controller writes before Scheduled.
	for _, f := range v1.StatusOwnership() {
		if !f.Takeover {
			continue
		}
		if f.Writer != v1.ManagerAgent || f.Kind != v1.KindVMI {
			t.Errorf("%s %s: takeover by %s, only the agent takes a VMI over", f.Kind, f.Path, f.Writer)
		}
		if w := seen[key{f.Kind, f.Path}][v1.Scheduling]; w != v1.ManagerController {
			t.Errorf("%s %s: takeover of a field the controller does not write before Scheduled (writer %q)", f.Kind, f.Path, w)
		}
	}
	var exceptions []string
	for _, f := range v1.StatusOwnership() {
		if f.Exception {
			exceptions = append(exceptions, f.Path)
		}
	}
	want := []string{"status.phase", "status.reason", "status.phaseTransitionTimestamps[phase=Failed]", "status.conditions[type=Ready]"}
	if diff := cmp.Diff(want, exceptions); diff != "" {
		t.Errorf("NodeUnresponsive exception (-want +got):\n%s", diff)
	}
}

// A list shared as a queue has one consumer and at least one appender, all
// implemented, and no other writer; its path is a whole list field.
func TestOwnership_Queues(t *testing.T) {
	types := map[string]reflect.Type{
		v1.KindVMI: reflect.TypeOf(v1.VirtualMachineInstanceStatus{}),
		v1.KindVM:  reflect.TypeOf(v1.VirtualMachineStatus{}),
	}
	type key struct{ kind, path string }
	queues := map[key][]v1.StatusField{}
	for _, f := range v1.StatusOwnership() {
		if f.Queue != "" {
			queues[key{f.Kind, f.Path}] = append(queues[key{f.Kind, f.Path}], f)
		}
	}
	for _, f := range v1.StatusOwnership() {
		if k := (key{f.Kind, f.Path}); f.Queue == "" && queues[k] != nil {
			t.Errorf("%s %s: queue also written by %s outside the queue", f.Kind, f.Path, f.Writer)
		}
	}
	for k, rows := range queues {
		roles := map[v1.QueueRole][]string{}
		for _, f := range rows {
			if f.Future || f.Exception || len(f.While) > 0 {
				t.Errorf("%s %s by %s: a queue row is always on, implemented and not an exception", k.kind, k.path, f.Writer)
			}
			roles[f.Queue] = append(roles[f.Queue], f.Writer)
		}
		if len(roles[v1.QueueConsume]) != 1 || len(roles[v1.QueueAppend]) == 0 || len(roles) != 2 {
			t.Errorf("%s %s: roles %v, want one consumer and appenders", k.kind, k.path, roles)
		}
		field, ok := jsonField(types[k.kind], strings.TrimPrefix(k.path, "status."))
		if !ok || field.Type.Kind() != reflect.Slice {
			t.Errorf("%s %s: a queue must be a list field of the status", k.kind, k.path)
		}
	}
	want := []v1.StatusField{
		{Kind: v1.KindVM, Path: "status.stateChangeRequests", Writer: v1.ManagerAPI, Queue: v1.QueueAppend},
		{Kind: v1.KindVM, Path: "status.stateChangeRequests", Writer: v1.ManagerController, Queue: v1.QueueConsume},
	}
	if diff := cmp.Diff(want, queues[key{v1.KindVM, "status.stateChangeRequests"}]); diff != "" {
		t.Errorf("VM request queue (-want +got):\n%s", diff)
	}
}

// Every implemented path names a field of the Go type (by JSON name), and
// every top-level status field of the Go types has a row.
func TestOwnership_PathsMatchTypes(t *testing.T) {
	types := map[string]reflect.Type{
		v1.KindVMI:  reflect.TypeOf(v1.VirtualMachineInstanceStatus{}),
		v1.KindVM:   reflect.TypeOf(v1.VirtualMachineStatus{}),
		v1.KindVMIM: reflect.TypeOf(v1.VirtualMachineInstanceMigrationStatus{}),
	}
	covered := map[string]map[string]bool{}
	for _, f := range v1.StatusOwnership() {
		path := strings.TrimPrefix(f.Path, "status.")
		top, _, _ := strings.Cut(path, ".")
		top, _, _ = strings.Cut(top, "[")
		if covered[f.Kind] == nil {
			covered[f.Kind] = map[string]bool{}
		}
		covered[f.Kind][top] = true
		if f.Future {
			continue
		}
		if _, ok := jsonField(types[f.Kind], top); !ok {
			t.Errorf("%s %s: no status field %q in the Go type", f.Kind, f.Path, top)
		}
	}
	for kind, typ := range types {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if !covered[kind][name] {
				t.Errorf("%s status.%s has no row in the ownership table", kind, name)
			}
		}
	}
}

func jsonField(typ reflect.Type, name string) (reflect.StructField, bool) {
	for i := range typ.NumField() {
		if n, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); n == name {
			return typ.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func TestStatus_OwnedBy(t *testing.T) {
	at := metav1.Date(2026, 1, 2, 3, 4, 5, 0, metav1.Now().Location())
	full := v1.VirtualMachineInstanceStatus{
		Phase: v1.Running, NodeName: "n1", ActivePods: map[string]string{"pod": "n1"},
		PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{
			{Phase: v1.Pending, PhaseTransitionTimestamp: at}, {Phase: v1.Scheduled, PhaseTransitionTimestamp: at},
			{Phase: v1.Running, PhaseTransitionTimestamp: at},
		},
		Conditions: []v1.VirtualMachineInstanceCondition{
			{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse, Reason: "PvcNotFound"},
			{Type: "SomeoneElses", Status: corev1.ConditionTrue},
		},
		Interfaces: []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", IPAddress: "10.0.0.2"}},
	}
	tests := []struct {
		manager string
		want    map[string]any
	}{
		{v1.ManagerAgent, map[string]any{
			"phase": "Running", "nodeName": "n1", "activePods": map[string]any{"pod": "n1"},
			"phaseTransitionTimestamps": []any{
				map[string]any{"phase": "Scheduled", "phaseTransitionTimestamp": "2026-01-02T03:04:05Z"},
				map[string]any{"phase": "Running", "phaseTransitionTimestamp": "2026-01-02T03:04:05Z"},
			},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}},
			"interfaces": []any{map[string]any{"name": "default", "ipAddress": "10.0.0.2"}},
			// guestOSInfo is empty: left out, not applied as {}.
		}},
		{v1.ManagerController, map[string]any{
			"phase": "Running", "nodeName": "n1", "activePods": map[string]any{"pod": "n1"},
			"phaseTransitionTimestamps": []any{
				map[string]any{"phase": "Pending", "phaseTransitionTimestamp": "2026-01-02T03:04:05Z"},
				map[string]any{"phase": "Scheduled", "phaseTransitionTimestamp": "2026-01-02T03:04:05Z"},
			},
			"conditions": []any{map[string]any{"type": "Synchronized", "status": "False", "reason": "PvcNotFound"}},
		}},
		{v1.ManagerNodeController, map[string]any{
			"phase":      "Running",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}},
		}},
		{"nobody", map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.manager, func(t *testing.T) {
			got, err := full.OwnedBy(tt.manager)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("OwnedBy(%s) (-want +got):\n%s", tt.manager, diff)
			}
		})
	}
}
