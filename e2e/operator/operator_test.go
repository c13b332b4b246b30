package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/operator"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

const (
	ns      = "nodevirt"
	vmNS    = "nodevirt-e2e-operator"
	upgrade = "e2e-upgrade" // the second tag of the same locally built images
)

// TestOperator_Cluster: the operator takes over the local installation,
// upgrades it with a VM running, and blocks its own removal while the VM
// exists. Disturbed = the VMI's launcher pod or QEMU pid changed, or the
// VMI left Running.
func TestOperator_Cluster(t *testing.T) {
	c := localcluster.Deployed(t, testenv.LogWriter(t))
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, kv := kubernetes.NewForConfigOrDie(rc), versioned.NewForConfigOrDie(rc)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin []byte, args ...string) string {
		t.Helper()
		var in io.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
		}
		out, err := c.Kubectl(ctx, in, args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}

	// A VM running before the operator exists.
	kubectl(nil, "create", "namespace", vmNS)
	t.Cleanup(func() { _, _ = c.Kubectl(context.Background(), nil, "delete", "namespace", vmNS, "--wait=false") })
	kubectl(nil, "apply", "-n", vmNS, "-f", filepath.Join(root, "deploy", "examples", "vmi.yaml"))
	vmi := waitRunning(t, ctx, kv, "demo-vmi")
	podUID, qemu := launcher(t, vmi)
	t.Logf("VMI %s runs in pod %s, QEMU pid %d", vmi.Name, podUID, qemu)
	undisturbed := func(when string) {
		t.Helper()
		cur, err := kv.KubevirtV1().VirtualMachineInstances(vmNS).Get(ctx, "demo-vmi", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid, pid := launcher(t, cur)
		if cur.Status.Phase != v1.Running || uid != podUID || pid != qemu {
			t.Errorf("%s: the VM was disturbed: phase %s, pod %s (was %s), QEMU pid %d (was %d)", when, cur.Status.Phase, uid, podUID, pid, qemu)
		}
	}

	// The operator, then the KubeVirt resource with the local differences.
	kubectl(nil, "apply", "-k", filepath.Join(root, "deploy", "local", "operator"))
	t.Cleanup(func() { removeOperator(t, c, kv) })
	shape := kubectl(nil, "-n", ns, "get", "configmap", "nodevirt-config", "-o", "jsonpath={.data.launcherPodShape}")
	kubeVirt := &v1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"},
		Spec:       v1.KubeVirtSpec{CustomizeComponents: v1.CustomizeComponents{Patches: localPatches(t, root, c.Dir, shape)}},
	}
	body, err := json.Marshal(kubeVirt)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubectl(body, "apply", "-f", "-")
	waitDeployed(t, ctx, kv, "dev")
	t.Logf("MEASURE operator takeover: Deployed %v after the KubeVirt was applied", time.Since(start).Round(time.Millisecond))
	undisturbed("after the takeover")

	// The upgrade: the same images tagged again.
	if err := c.Script(ctx, "tag-images.sh", "dev", upgrade); err != nil {
		t.Fatal(err)
	}
	agentBefore := agentPod(t, ctx, kube, vmi.Status.NodeName, "")
	start = time.Now()
	if _, err := kv.KubevirtV1().KubeVirts(ns).Patch(ctx, "kubevirt", types.MergePatchType,
		[]byte(`{"spec":{"imageTag":"`+upgrade+`"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sawProgressing := false
	testenv.Eventually(t, 5*time.Minute, "upgraded: Deployed at "+upgrade, func() (bool, error) {
		k, err := kv.KubevirtV1().KubeVirts(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cond(k, operator.ConditionProgressing) == corev1.ConditionTrue {
			sawProgressing = true
		}
		return k.Status.ObservedKubeVirtVersion == upgrade && k.Status.Phase == v1.KubeVirtPhaseDeployed &&
			cond(k, operator.ConditionAvailable) == corev1.ConditionTrue, nil
	})
	t.Logf("MEASURE upgrade dev → %s: Deployed %v after spec.imageTag changed", upgrade, time.Since(start).Round(time.Millisecond))
	if !sawProgressing {
		t.Error("Progressing was never True during the upgrade")
	}
	agentAfter := agentPod(t, ctx, kube, vmi.Status.NodeName, agentBefore.UID)
	if agentAfter.UID == agentBefore.UID || !strings.HasSuffix(agentAfter.Spec.Containers[0].Image, ":"+upgrade) {
		t.Errorf("the agent did not roll: pod %s → %s, image %s", agentBefore.Name, agentAfter.Name, agentAfter.Spec.Containers[0].Image)
	}
	undisturbed("after the upgrade")

	// Uninstalling is refused while the VM exists.
	if err := kv.KubevirtV1().KubeVirts(ns).Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "Deleting, blocked by the VMI", func() (bool, error) {
		k, err := kv.KubevirtV1().KubeVirts(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, co := range k.Status.Conditions {
			if co.Type == operator.ConditionDegraded && co.Reason == operator.ReasonDeletionBlocked {
				return k.Status.Phase == v1.KubeVirtPhaseDeleting, nil
			}
		}
		return false, nil
	})
	if _, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{}); err != nil {
		t.Errorf("the agent went while a VM exists: %v", err)
	}
	undisturbed("after the refused uninstall")
}

// localPatches turns deploy/local's kustomize patches into
// customizeComponents patches, with the values hack/deploy-local.sh fills
// in (the cluster's nodes directory, the launcher pod shape). The
// controller's launcherImage is left to the operator (it follows the
// installed version).
func localPatches(t *testing.T, root, clusterDir, shape string) []v1.CustomizeComponentsPatch {
	t.Helper()
	var k struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "local", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var out []v1.CustomizeComponentsPatch
	for _, p := range k.Patches {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "local", p.Path))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "/CLUSTER_DIR/nodes", filepath.Join(clusterDir, "nodes"))
		s = strings.ReplaceAll(s, "LAUNCHER_POD_SHAPE", shape)
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("%s: %v", p.Path, err)
		}
		if data, ok := m["data"].(map[string]any); ok {
			delete(data, "launcherImage")
		}
		patch, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		md := m["metadata"].(map[string]any)
		out = append(out, v1.CustomizeComponentsPatch{ResourceType: m["kind"].(string), ResourceName: md["name"].(string),
			Type: v1.StrategicMergePatchType, Patch: string(patch)})
	}
	if len(out) == 0 {
		t.Fatal("deploy/local has no patches")
	}
	return out
}

func waitRunning(t *testing.T, ctx context.Context, kv versioned.Interface, name string) *v1.VirtualMachineInstance {
	t.Helper()
	var vmi *v1.VirtualMachineInstance
	testenv.Eventually(t, 3*time.Minute, "VMI "+name+" Running", func() (bool, error) {
		var err error
		vmi, err = kv.KubevirtV1().VirtualMachineInstances(vmNS).Get(ctx, name, metav1.GetOptions{})
		return err == nil && vmi.Status.Phase == v1.Running, err
	})
	return vmi
}

// launcher returns the UID of the VMI's launcher pod and its QEMU's pid.
func launcher(t *testing.T, vmi *v1.VirtualMachineInstance) (string, int) {
	t.Helper()
	if len(vmi.Status.ActivePods) != 1 {
		t.Fatalf("VMI %s: active pods %v", vmi.Name, vmi.Status.ActivePods)
	}
	for uid := range vmi.Status.ActivePods {
		pid, err := localcluster.PodQEMU(string(uid))
		if err != nil {
			t.Fatalf("VMI %s: %v", vmi.Name, err)
		}
		return string(uid), pid
	}
	return "", 0
}

func waitDeployed(t *testing.T, ctx context.Context, kv versioned.Interface, version string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Minute, "Deployed at "+version, func() (bool, error) {
		k, err := kv.KubevirtV1().KubeVirts(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return k.Status.Phase == v1.KubeVirtPhaseDeployed && k.Status.ObservedKubeVirtVersion == version &&
			cond(k, operator.ConditionAvailable) == corev1.ConditionTrue, nil
	})
}

func cond(k *v1.KubeVirt, typ string) corev1.ConditionStatus {
	for _, c := range k.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// agentPod is the running agent pod of node, once it is not the pod old.
func agentPod(t *testing.T, ctx context.Context, kube kubernetes.Interface, node string, old types.UID) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testenv.Eventually(t, 2*time.Minute, "the agent pod of "+node, func() (bool, error) {
		var err error
		pod, err = localcluster.FindAgentPod(ctx, kube, node)
		return err == nil && pod.UID != old && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil, nil
	})
	return pod
}

// removeOperator leaves the installation as hack/deploy-local.sh made it,
// for the suites after this one: the KubeVirt resource goes without
// removing anything (its finalizer dropped once the operator is stopped),
// then the operator's own objects; the namespace and CRDs stay.
func removeOperator(t *testing.T, c *localcluster.Cluster, kv versioned.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-n", ns, "delete", "deployment", "nodevirt-operator", "--wait=true"},
		{"delete", "clusterrolebinding,clusterrole", "nodevirt-operator"},
		{"-n", ns, "delete", "serviceaccount", "nodevirt-operator"},
	} {
		if _, err := c.Kubectl(ctx, nil, args...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	_, err := kv.KubevirtV1().KubeVirts(ns).Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: %v", err)
	}
	if err := kv.KubevirtV1().KubeVirts(ns).Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: %v", err)
	}
}
