package instancetype

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/tools/record"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	itclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/instancetype/v1beta1"
)

// Labels on the ControllerRevisions, KubeVirt's: what object was captured.
const (
	LabelObjectName       = "instancetype.kubevirt.io/object-name"
	LabelObjectKind       = "instancetype.kubevirt.io/object-kind"
	LabelObjectUID        = "instancetype.kubevirt.io/object-uid"
	LabelObjectGeneration = "instancetype.kubevirt.io/object-generation"
	LabelObjectVersion    = "instancetype.kubevirt.io/object-version"
)

// EventPreferenceNotApplied is the event reason for preferences nodevirt
// accepts but cannot apply.
const EventPreferenceNotApplied = "PreferenceNotApplied"

// Deps are the Revisions' collaborators.
type Deps struct {
	// Client reads the four instancetype.kubevirt.io kinds.
	Client itclient.InstancetypeV1beta1Interface
	// Revisions creates and reads the VMs' ControllerRevisions.
	Revisions appsv1client.ControllerRevisionsGetter
	// Recorder, if set, receives the PreferenceNotApplied events.
	Recorder record.EventRecorder
}

// Revisions captures VMs' instancetypes and preferences in
// ControllerRevisions and expands VMIs from them. Build it with New; it is
// safe for concurrent use.
type Revisions struct {
	d Deps
}

// New returns Revisions over d.
func New(d Deps) *Revisions { return &Revisions{d: d} }

// Store returns the VM's status.instancetypeRef and status.preferenceRef.
// A ref whose name or kind no longer matches the VM's spec is reset; one
// without a ControllerRevision gets one (spec.*.revisionName if the user
// set it, else a new revision capturing the object as it is now). A nil
// matcher gives a nil ref. The VM is not modified.
func (r *Revisions) Store(ctx context.Context, vm *v1.VirtualMachine) (it, pref *v1.InstancetypeStatusRef, err error) {
	if m := vm.Spec.Instancetype; m != nil {
		kind, ok := instancetypeKind(m.Kind)
		if !ok {
			return nil, nil, &KindError{Field: "spec.instancetype.kind", Kind: m.Kind}
		}
		it, err = r.storeOne(ctx, vm, vm.Status.InstancetypeRef, m.Name, kind, m.RevisionName)
		if err != nil {
			return nil, nil, err
		}
	}
	if m := vm.Spec.Preference; m != nil {
		kind, ok := preferenceKind(m.Kind)
		if !ok {
			return nil, nil, &KindError{Field: "spec.preference.kind", Kind: m.Kind}
		}
		pref, err = r.storeOne(ctx, vm, vm.Status.PreferenceRef, m.Name, kind, m.RevisionName)
		if err != nil {
			return nil, nil, err
		}
	}
	return it, pref, nil
}

func (r *Revisions) storeOne(ctx context.Context, vm *v1.VirtualMachine, old *v1.InstancetypeStatusRef,
	name, kind, revisionName string) (*v1.InstancetypeStatusRef, error) {
	ref := &v1.InstancetypeStatusRef{Name: name, Kind: kind}
	if old != nil && old.Name == name && old.Kind == kind && old.ControllerRevisionRef != nil {
		ref.ControllerRevisionRef = old.ControllerRevisionRef.DeepCopy()
	}
	if revisionName != "" {
		ref.ControllerRevisionRef = &v1.ControllerRevisionRef{Name: revisionName}
	}
	if ref.ControllerRevisionRef != nil {
		return ref, nil
	}
	obj, err := r.fetch(ctx, vm.Namespace, kind, name)
	if err != nil {
		return nil, err
	}
	if it, ok := obj.(*itv1beta1.VirtualMachineInstancetype); ok {
		if _, err := Expand(&vm.Spec, &it.Spec, nil); err != nil {
			return nil, err
		}
	}
	if it, ok := obj.(*itv1beta1.VirtualMachineClusterInstancetype); ok {
		if _, err := Expand(&vm.Spec, &it.Spec, nil); err != nil {
			return nil, err
		}
	}
	rev, err := newRevision(vm, obj, kind)
	if err != nil {
		return nil, err
	}
	if err := r.create(ctx, rev); err != nil {
		return nil, err
	}
	ref.ControllerRevisionRef = &v1.ControllerRevisionRef{Name: rev.Name}
	return ref, nil
}

// fetch reads the named object of kind (namespace only for namespaced kinds).
func (r *Revisions) fetch(ctx context.Context, ns, kind, name string) (runtime.Object, error) {
	var (
		obj runtime.Object
		err error
	)
	get := metav1.GetOptions{}
	switch kind {
	case itv1beta1.InstancetypeKind:
		obj, err = r.d.Client.VirtualMachineInstancetypes(ns).Get(ctx, name, get)
	case itv1beta1.ClusterInstancetypeKind:
		ns = ""
		obj, err = r.d.Client.VirtualMachineClusterInstancetypes().Get(ctx, name, get)
	case itv1beta1.PreferenceKind:
		obj, err = r.d.Client.VirtualMachinePreferences(ns).Get(ctx, name, get)
	case itv1beta1.ClusterPreferenceKind:
		ns = ""
		obj, err = r.d.Client.VirtualMachineClusterPreferences().Get(ctx, name, get)
	}
	if apierrors.IsNotFound(err) {
		return nil, &NotFoundError{Kind: kind, Namespace: ns, Name: name}
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", kind, name, err)
	}
	return obj, nil
}

// captured is what a revision's data holds: the object with its kind, its
// name and its spec (metadata trimmed, as KubeVirt trims it).
type captured struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   capturedMeta    `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

type capturedMeta struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// newRevision renders the ControllerRevision capturing obj for vm, named
// as KubeVirt names it: <vm>-<object>-<version>-<object uid>-<generation>.
func newRevision(vm *v1.VirtualMachine, obj runtime.Object, kind string) (*appsv1.ControllerRevision, error) {
	meta, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	spec, err := specOf(obj)
	if err != nil {
		return nil, err
	}
	version := itv1beta1.SchemeGroupVersion.Version
	data, err := json.Marshal(captured{
		APIVersion: itv1beta1.SchemeGroupVersion.String(), Kind: kind,
		Metadata: capturedMeta{Name: meta.GetName(), Namespace: meta.GetNamespace(), UID: string(meta.GetUID()), Generation: meta.GetGeneration()},
		Spec:     spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", kind, meta.GetName(), err)
	}
	gen := strconv.FormatInt(meta.GetGeneration(), 10)
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("%s-%s-%s-%s-%s", vm.Name, meta.GetName(), version, meta.GetUID(), gen),
			Namespace:       vm.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind("VirtualMachine"))},
			Labels: map[string]string{
				LabelObjectName: meta.GetName(), LabelObjectKind: kind, LabelObjectUID: string(meta.GetUID()),
				LabelObjectGeneration: gen, LabelObjectVersion: version,
			},
		},
		Data: runtime.RawExtension{Raw: data},
	}, nil
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

func specOf(obj runtime.Object) (json.RawMessage, error) {
	var spec any
	switch o := obj.(type) {
	case *itv1beta1.VirtualMachineInstancetype:
		spec = o.Spec
	case *itv1beta1.VirtualMachineClusterInstancetype:
		spec = o.Spec
	case *itv1beta1.VirtualMachinePreference:
		spec = o.Spec
	case *itv1beta1.VirtualMachineClusterPreference:
		spec = o.Spec
	default:
		return nil, fmt.Errorf("cannot capture %T", obj)
	}
	return json.Marshal(spec)
}

// create creates rev; an existing revision of that name is fine if it holds
// the same data (a retry after a crash), else an error.
func (r *Revisions) create(ctx context.Context, rev *appsv1.ControllerRevision) error {
	crs := r.d.Revisions.ControllerRevisions(rev.Namespace)
	_, err := crs.Create(ctx, rev, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create controllerrevision %s/%s: %w", rev.Namespace, rev.Name, err)
	}
	old, err := crs.Get(ctx, rev.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get controllerrevision %s/%s: %w", rev.Namespace, rev.Name, err)
	}
	if !bytes.Equal(compactJSON(old.Data.Raw), compactJSON(rev.Data.Raw)) {
		return fmt.Errorf("controllerrevision %s/%s exists with other data", rev.Namespace, rev.Name)
	}
	return nil
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// Expand returns the VMI template for vm, expanded (see the function
// Expand) from the ControllerRevisions its status refs name: Store must
// have filled them. Preferences that are not applied are reported in an
// event on the VM.
func (r *Revisions) Expand(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachineInstanceTemplateSpec, error) {
	var (
		it   *itv1beta1.VirtualMachineInstancetypeSpec
		pref *itv1beta1.VirtualMachinePreferenceSpec
	)
	if vm.Spec.Instancetype != nil {
		it = &itv1beta1.VirtualMachineInstancetypeSpec{}
		if err := r.load(ctx, vm.Namespace, vm.Status.InstancetypeRef, "spec.instancetype", it); err != nil {
			return nil, err
		}
	}
	if vm.Spec.Preference != nil {
		pref = &itv1beta1.VirtualMachinePreferenceSpec{}
		if err := r.load(ctx, vm.Namespace, vm.Status.PreferenceRef, "spec.preference", pref); err != nil {
			return nil, err
		}
	}
	out, err := Expand(&vm.Spec, it, pref)
	if err != nil {
		return nil, err
	}
	if skipped := NotApplied(pref); len(skipped) > 0 && r.d.Recorder != nil {
		r.d.Recorder.Eventf(vm, corev1.EventTypeNormal, EventPreferenceNotApplied,
			"Preference %s: %v not applied: nodevirt has no vTPM", vm.Spec.Preference.Name, skipped)
	}
	return out, nil
}

// load decodes the spec captured in the revision ref names into spec.
func (r *Revisions) load(ctx context.Context, ns string, ref *v1.InstancetypeStatusRef, field string, spec any) error {
	if ref == nil || ref.ControllerRevisionRef == nil || ref.ControllerRevisionRef.Name == "" {
		return fmt.Errorf("%s: no ControllerRevision recorded in status yet", field)
	}
	name := ref.ControllerRevisionRef.Name
	rev, err := r.d.Revisions.ControllerRevisions(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &NotFoundError{Kind: "ControllerRevision", Namespace: ns, Name: name}
	}
	if err != nil {
		return fmt.Errorf("get controllerrevision %s/%s: %w", ns, name, err)
	}
	var c captured
	if err := json.Unmarshal(rev.Data.Raw, &c); err != nil {
		return fmt.Errorf("decode controllerrevision %s/%s: %w", ns, name, err)
	}
	if c.APIVersion != itv1beta1.SchemeGroupVersion.String() || c.Kind != ref.Kind {
		return &RevisionError{Name: name, Want: ref.Kind, Got: c.APIVersion + " " + c.Kind}
	}
	if err := json.Unmarshal(c.Spec, spec); err != nil {
		return fmt.Errorf("decode spec in controllerrevision %s/%s: %w", ns, name, err)
	}
	return nil
}

// RevisionError is a ControllerRevision that does not hold the kind the
// VM refers to (e.g. a wrong spec.instancetype.revisionName).
type RevisionError struct {
	Name, Want, Got string
}

func (e *RevisionError) Error() string {
	return fmt.Sprintf("ControllerRevision %q holds %s, want instancetype.kubevirt.io/v1beta1 %s", e.Name, e.Got, e.Want)
}

// Permanent reports that retrying cannot help.
func (*RevisionError) Permanent() bool { return true }
