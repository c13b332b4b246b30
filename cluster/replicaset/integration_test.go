package replicaset_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/replicaset"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// env is a real API server with the replica set controller running
// in-process on informers, as nodevirt-controller wires it. The test plays
// the vmi controller and the node agent (VMI phases and Ready).
type env struct {
	kv  versioned.Interface
	dyn dynamic.Interface
	ns  string
}

func startEnv(t *testing.T) *env {
	t.Helper()
	api := apiserver.Start(t)
	kube := kubernetes.NewForConfigOrDie(api.Config)
	kv := versioned.NewForConfigOrDie(api.Config)
	const ns = "replicas"
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithNamespace(ns))
	sets, vmis := factory.Kubevirt().V1().VirtualMachineInstanceReplicaSets(), factory.Kubevirt().V1().VirtualMachineInstances()
	ctl := replicaset.New(replicaset.Deps{
		ReplicaSets: sets.Lister(), VMIs: vmis.Lister(), Client: kv.KubevirtV1(), Recorder: record.NewFakeRecorder(1000),
	})
	loop := reconcile.New("replicaset", ctl, testenv.Logger(t), nil)
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{sets.Informer(), loop.Handler()}, {vmis.Informer(), ctl.VMIHandler(loop.EnqueueKey)}} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { loop.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return &env{kv: kv, dyn: dynamic.NewForConfigOrDie(api.Config), ns: ns}
}

func newRS(name string, replicas int32) *v1.VirtualMachineInstanceReplicaSet {
	mem := resource.MustParse("128Mi")
	return &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &v1.LabelSelector{MatchLabels: map[string]v1.LabelValue{"app": v1.LabelValue(name)}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
			},
		},
	}
}

// owned lists the VMIs rs controls that are not being deleted, oldest first.
func (e *env) owned(rs *v1.VirtualMachineInstanceReplicaSet) ([]v1.VirtualMachineInstance, error) {
	list, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v1.VirtualMachineInstance
	for _, v := range list.Items {
		if ref := metav1.GetControllerOf(&v); ref != nil && ref.UID == rs.UID && v.DeletionTimestamp == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// waitOwned waits until rs controls n live VMIs and its status says n
// replicas, ready of them ready, and returns the VMIs.
func (e *env) waitOwned(t *testing.T, rs *v1.VirtualMachineInstanceReplicaSet, n, ready int32) []v1.VirtualMachineInstance {
	t.Helper()
	var vmis []v1.VirtualMachineInstance
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d VMIs (%d ready) of %s", n, ready, rs.Name), func() (bool, error) {
		var err error
		if vmis, err = e.owned(rs); err != nil {
			return false, err
		}
		got, err := e.kv.KubevirtV1().VirtualMachineInstanceReplicaSets(e.ns).Get(context.Background(), rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := got.Status
		return len(vmis) == int(n) && s.Replicas == n && s.ReadyReplicas == ready, fmt.Errorf("%d VMIs, status %+v", len(vmis), s)
	})
	return vmis
}

// setPhase plays the controllers and the agent: phase, and Ready True
// when Running.
func (e *env) setPhase(t *testing.T, name string, phase v1.VirtualMachineInstancePhase) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("vmi %s → %s", name, phase), func() error {
		v, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		v.Status.Phase = phase
		ready := corev1.ConditionFalse
		if phase == v1.Running {
			ready = corev1.ConditionTrue
		}
		v.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: ready}}
		_, err = e.kv.KubevirtV1().VirtualMachineInstances(e.ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		return err
	})
}

// scalePatch is what `kubectl scale` sends: a merge patch of the scale
// subresource.
func (e *env) scalePatch(t *testing.T, name string, replicas int) {
	t.Helper()
	_, err := e.kv.KubevirtV1().RESTClient().Patch(types.MergePatchType).Namespace(e.ns).
		Resource("virtualmachineinstancereplicasets").Name(name).SubResource("scale").
		Body([]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))).Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("scale %s to %d: %v", name, replicas, err)
	}
}

func (e *env) setPaused(t *testing.T, name string, paused bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
	if _, err := e.kv.KubevirtV1().VirtualMachineInstanceReplicaSets(e.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hasCondition(rs *v1.VirtualMachineInstanceReplicaSet, ct v1.VirtualMachineInstanceReplicaSetConditionType) bool {
	for _, c := range rs.Status.Conditions {
		if c.Type == ct && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestReplicaSet(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	rss := e.kv.KubevirtV1().VirtualMachineInstanceReplicaSets(e.ns)
	rs, err := rss.Create(ctx, newRS("web", 0), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitOwned(t, rs, 0, 0)

	// 0 → 3 through the scale subresource, as `kubectl scale` does.
	e.scalePatch(t, "web", 3)
	vmis := e.waitOwned(t, rs, 3, 0)
	for _, v := range vmis {
		ref := metav1.GetControllerOf(&v)
		if !strings.HasPrefix(v.Name, "web") || len(v.Name) != len("web")+5 || v.GenerateName != "web" ||
			ref.Kind != replicaset.Kind || !ptr.Deref(ref.BlockOwnerDeletion, false) || v.Labels["app"] != "web" {
			t.Errorf("VMI %s (generateName %q, owner %+v, labels %v) is not a replica of web", v.Name, v.GenerateName, ref, v.Labels)
		}
		e.setPhase(t, v.Name, v1.Scheduled)
		e.setPhase(t, v.Name, v1.Running)
	}
	e.waitOwned(t, rs, 3, 3)
	scale, err := rss.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != "app=web" {
		t.Errorf("scale = spec %d status %d selector %q, want 3, 3, app=web", scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector)
	}

	t.Run("FailedReplaced", func(t *testing.T) {
		failed := vmis[0]
		e.setPhase(t, failed.Name, v1.Failed)
		testenv.Eventually(t, 30*time.Second, "failed VMI deleted", func() bool {
			_, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Get(ctx, failed.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		now := e.waitOwned(t, rs, 3, 2)
		for _, v := range now {
			if v.UID == failed.UID {
				t.Errorf("failed VMI %s still counted", v.Name)
			}
		}
	})

	t.Run("ScaleDownKeepsRunningOldest", func(t *testing.T) {
		// Two Running (ready) and one new Pending: 3 → 1 through
		// UpdateScale deletes the Pending one first, then the newer
		// Running one.
		before, err := e.owned(rs)
		if err != nil {
			t.Fatal(err)
		}
		var oldest *v1.VirtualMachineInstance
		for i, v := range before {
			if v.Status.Phase == v1.Running && (oldest == nil || v.CreationTimestamp.Before(&oldest.CreationTimestamp) ||
				(v.CreationTimestamp.Equal(&oldest.CreationTimestamp) && v.Name < oldest.Name)) {
				oldest = &before[i]
			}
		}
		scale, err := rss.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 1
		if _, err := rss.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		left := e.waitOwned(t, rs, 1, 1)
		if left[0].UID != oldest.UID {
			t.Errorf("kept %s, want the oldest running VMI %s", left[0].Name, oldest.Name)
		}
	})

	t.Run("PauseHonoured", func(t *testing.T) {
		e.setPaused(t, "web", true)
		testenv.Eventually(t, 30*time.Second, "ReplicaPaused", func() (bool, error) {
			got, err := rss.Get(ctx, "web", metav1.GetOptions{})
			return err == nil && hasCondition(got, v1.VirtualMachineInstanceReplicaSetReplicaPaused), err
		})
		e.scalePatch(t, "web", 3)
		// A negative: for a while, no VMI may appear.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if vmis, err := e.owned(rs); err != nil || len(vmis) != 1 {
				t.Fatalf("paused replica set: %d VMIs (err %v), want 1", len(vmis), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		e.setPaused(t, "web", false)
		e.waitOwned(t, rs, 3, 1)
		got, err := rss.Get(ctx, "web", metav1.GetOptions{})
		if err != nil || hasCondition(got, v1.VirtualMachineInstanceReplicaSetReplicaPaused) {
			t.Errorf("resumed replica set still has ReplicaPaused (err %v)", err)
		}
	})

	t.Run("ReleaseAndAdopt", func(t *testing.T) {
		vmis := e.waitOwned(t, rs, 3, 1)
		var running v1.VirtualMachineInstance
		for _, v := range vmis {
			if v.Status.Phase == v1.Running {
				running = v
			}
		}
		relabel := func(value string) {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, value)
			if _, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Patch(ctx, running.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		relabel("elsewhere")
		testenv.Eventually(t, 30*time.Second, "relabelled VMI released", func() (bool, error) {
			v, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Get(ctx, running.Name, metav1.GetOptions{})
			return err == nil && metav1.GetControllerOf(v) == nil, err
		})
		e.waitOwned(t, rs, 3, 0) // replaced
		relabel("web")
		// Adopted back (4 replicas), then one not yet running is deleted.
		left := e.waitOwned(t, rs, 3, 1)
		found := false
		for _, v := range left {
			found = found || v.UID == running.UID
		}
		if !found {
			t.Errorf("the running VMI %s was not adopted back and kept", running.Name)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		bad := newRS("bad", 1)
		bad.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "other"}
		_, err := rss.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") {
			t.Errorf("selector not matching the template: err %v, want Invalid naming spec.selector", err)
		}
		empty := newRS("empty", 1)
		empty.Spec.Selector = &v1.LabelSelector{}
		_, err = rss.Create(ctx, empty, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") {
			t.Errorf("empty selector: err %v, want Invalid naming spec.selector", err)
		}
		expr := newRS("expr", 1)
		expr.Spec.Selector = &v1.LabelSelector{MatchExpressions: []v1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []v1.LabelValue{"expr", "x"}}}}
		if _, err := rss.Create(ctx, expr, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("matchExpressions matching the template: %v", err)
		}
		expr.Spec.Selector.MatchExpressions[0].Operator = metav1.LabelSelectorOpNotIn
		if _, err := rss.Create(ctx, expr, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
			t.Errorf("NotIn excluding the template's label: err %v, want Invalid", err)
		}
	})

	t.Run("KubeVirtExamples", func(t *testing.T) {
		applyExamples(t, e.dyn, e.ns, "vmi-replicaset-cirros.yaml", "vm-pool-cirros.yaml")
	})
}

// applyExamples applies KubeVirt's published example files unchanged, by
// server-side apply with strict field validation and dry run (what
// `kubectl apply --server-side --dry-run=server` sends).
func applyExamples(t *testing.T, dyn dynamic.Interface, ns string, files ...string) {
	dir := testenv.KubeVirtExamples(t)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Object == nil {
				continue
			}
			gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
			if err != nil {
				t.Fatal(err)
			}
			plural := strings.ToLower(obj.GetKind()) + "s"
			body, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = dyn.Resource(gv.WithResource(plural)).Namespace(ns).Patch(context.Background(), obj.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "kubectl", DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			if err != nil {
				t.Errorf("%s: apply %s %s: %v", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
}
