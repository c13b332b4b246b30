package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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

// TestOperator_Cluster: nodevirt as hack/deploy-local.sh installs it (the
// operator, then the local KubeVirt resource) upgrades to a second locally
// built tag with a VM running and nothing disturbed; deleting the KubeVirt
// is refused while the VM exists and, once it is gone, removes everything
// but the CRDs; the two applies then install it again from there, and a
// VM runs. Disturbed = the VMI's launcher pod or QEMU pid changed, or the
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
	// Whatever happens, the suites after this one find nodevirt installed.
	t.Cleanup(func() { reinstall(t, c, kv) })

	waitDeployed(t, ctx, kv, "dev")
	checkOperatorCertificates(t, ctx, kube)
	// The uninstall below waits for every VM of the cluster to be gone:
	// only this test's may exist.
	if vms, vmis := kubectl(nil, "get", "vm", "-A", "-o", "name"), kubectl(nil, "get", "vmi", "-A", "-o", "name"); vms+vmis != "" {
		t.Fatalf("VMs left by an earlier run block the uninstall step; delete them first:\n%s%s", vms, vmis)
	}

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

	// The upgrade: the same images tagged again.
	if err := c.Script(ctx, "tag-images.sh", "dev", upgrade); err != nil {
		t.Fatal(err)
	}
	agentBefore := agentPod(t, ctx, kube, vmi.Status.NodeName, "")
	start := time.Now()
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

	// Once the VM is gone, everything goes but the CRDs.
	kubectl(nil, "delete", "-n", vmNS, "vmi", "demo-vmi", "--wait=true", "--timeout=2m")
	start = time.Now()
	testenv.Eventually(t, 3*time.Minute, "the KubeVirt removed", func() (bool, error) {
		_, err := kv.KubevirtV1().KubeVirts(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	t.Logf("MEASURE uninstall: the KubeVirt gone %v after its last VMI", time.Since(start).Round(time.Millisecond))
	checkUninstalled(t, ctx, c)

	// The two applies install it again (hack/deploy-local.sh), with the
	// operator itself removed first: what a fresh cluster goes through,
	// with the CRDs and the images already there.
	removeOperator(t, c)
	start = time.Now()
	if err := localcluster.Deploy(ctx, c, testenv.LogWriter(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE install: the two applies → Deployed, every node ready for VMs: %v", time.Since(start).Round(time.Millisecond))
	checkOperatorCertificates(t, ctx, kube)
	kubectl(nil, "apply", "-n", vmNS, "-f", filepath.Join(root, "deploy", "examples", "vmi.yaml"))
	waitRunning(t, ctx, kv, "demo-vmi")
	t.Logf("MEASURE install: a VMI Running %v after the two applies began", time.Since(start).Round(time.Millisecond))
}

// checkUninstalled: no object the operator installed is left but the
// CRDs (which stay, as KubeVirt's do), nor the certificates it made.
func checkUninstalled(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	t.Helper()
	sel := "-l=" + operator.ManagedByLabel + "=" + operator.ManagedBy
	for _, args := range [][]string{
		{"-n", ns, "get", "deployments,daemonsets,services,configmaps,secrets,serviceaccounts,roles,rolebindings", sel, "-o", "name"},
		{"get", "clusterroles,clusterrolebindings,apiservices,validatingadmissionpolicies,validatingadmissionpolicybindings", sel, "-o", "name"},
	} {
		out, err := c.Kubectl(ctx, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("left after the uninstall: %s", s)
		}
	}
	for _, name := range []string{"nodevirt-ca", "nodevirt-api-serving"} {
		if out, err := c.Kubectl(ctx, nil, "-n", ns, "get", "secret", name, "--ignore-not-found", "-o", "name"); err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("Secret %s left after the uninstall: %q %v", name, out, err)
		}
	}
	out, err := c.Kubectl(ctx, nil, "get", "crd", "virtualmachines.kubevirt.io", "kubevirts.kubevirt.io", "-o", "name")
	if err != nil {
		t.Errorf("the CRDs must stay: %v %s", err, out)
	}
}

// checkOperatorCertificates: nodevirt-api's serving certificate is the
// operator's, and the APIServices trust its CA.
func checkOperatorCertificates(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, operator.APIServingSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "nodevirt-ca", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var as struct {
		Spec struct {
			CABundle []byte `json:"caBundle"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &as); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(as.Spec.CABundle, s.Data["ca.crt"]) {
		t.Error("APIService v1.subresources.kubevirt.io does not trust nodevirt-api-serving's CA")
	}
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

// removeOperator deletes nodevirt-operator's own objects (its Deployment,
// RBAC and ServiceAccount); the namespace and the CRDs stay.
func removeOperator(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-n", ns, "delete", "deployment", "nodevirt-operator", "--wait=true"},
		{"delete", "clusterrolebinding,clusterrole", "nodevirt-operator"},
		{"-n", ns, "delete", "rolebinding,role,serviceaccount", "nodevirt-operator"},
	} {
		if _, err := c.Kubectl(ctx, nil, args...); err != nil {
			t.Errorf("remove the operator: %v", err)
		}
	}
}

// reinstall leaves nodevirt installed for the suites after this one: a
// KubeVirt still being deleted (a failed step) is let go once its VMs are,
// then hack/deploy-local.sh runs again. Nothing to do after a pass.
func reinstall(t *testing.T, c *localcluster.Cluster, kv versioned.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k, err := kv.KubevirtV1().KubeVirts(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
	if err == nil && k.DeletionTimestamp == nil && k.Spec.ImageTag == "" && k.Status.Phase == v1.KubeVirtPhaseDeployed {
		return
	}
	if err == nil && k.DeletionTimestamp != nil {
		_, _ = c.Kubectl(ctx, nil, "delete", "namespace", vmNS, "--wait=true", "--timeout=3m")
		_, _ = c.Kubectl(ctx, nil, "-n", ns, "wait", "--for=delete", "kubevirt/kubevirt", "--timeout=2m")
	}
	if err == nil && k.Spec.ImageTag != "" {
		_, _ = kv.KubevirtV1().KubeVirts(ns).Patch(ctx, "kubevirt", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/imageTag"}]`), metav1.PatchOptions{})
	}
	if err := localcluster.Deploy(ctx, c, testenv.LogWriter(t)); err != nil {
		t.Errorf("reinstall: %v", err)
	}
}
