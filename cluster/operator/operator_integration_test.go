package operator_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/operator"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

const ns = "nodevirt"

// TestOperator_Integration runs the operator process against a real API
// server with the real component manifests (rendered by hack/manifests):
// install from a KubeVirt resource, status through Deploying to Deployed,
// an upgrade by spec.imageTag, an invalid spec refused naming the field,
// deletion blocked while a VMI exists, then every component removed but
// the CRDs. No kubelet or controller-manager runs here: the test writes
// the Deployments' and the DaemonSet's status as their controllers would;
// the local cluster's e2e runs the real roll.
func TestOperator_Integration(t *testing.T) {
	env := apiserver.Start(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	kv := versioned.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The operator runs as deployed: as its ServiceAccount with the RBAC of
	// deploy/operator, its registry and version read from its own pod
	// (which no kubelet runs here).
	apiserver.ApplyRBAC(t, kube, "deploy/operator/rbac.yaml")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodevirt-operator-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "registry.test/nv/nodevirt-operator:v1"}}}}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, apiserver.Impersonate(t, env.Kubeconfig, ns, "nodevirt-operator"), pod.Name)

	dyn := dynamic.NewForConfigOrDie(env.Config)
	var nodeCA []byte // made at install, the same after the upgrade
	kvs := kv.KubevirtV1().KubeVirts(ns)
	if _, err := kvs.Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("Install", func(t *testing.T) {
		took := testenv.Eventually(t, 60*time.Second, "components applied, Deploying", func() (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return d.Spec.Template.Spec.Containers[0].Image == "registry.test/nv/nodevirt-controller:v1" &&
				k.Status.Phase == v1.KubeVirtPhaseDeploying && conditionOf(k, operator.ConditionProgressing).Status == "True" &&
				k.Status.TargetKubeVirtVersion == "v1" && k.Status.OperatorVersion == "v1", nil
		})
		t.Logf("install applied in %v", took)
		ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			if !strings.HasPrefix(c.Image, "registry.test/nv/") || !strings.HasSuffix(c.Image, ":v1") {
				t.Errorf("agent DaemonSet container %s: image %s", c.Name, c.Image)
			}
		}
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "nodevirt-config", metav1.GetOptions{})
		if err != nil || cm.Data["launcherImage"] != "registry.test/nv/nodevirt-launcher:v1" {
			t.Errorf("nodevirt-config: %v %v", cm.Data, err)
		}
		for _, get := range []func() error{
			func() error {
				_, err := kube.RbacV1().ClusterRoles().Get(ctx, "kubevirt.io:view", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-api", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "nodevirt-kubevirt-singleton", metav1.GetOptions{})
				return err
			},
		} {
			if err := get(); err != nil {
				t.Error(err)
			}
		}
		nodeCA = checkCertificates(t, kube, dyn)
		rollOut(t, kube)
		testenv.Eventually(t, 30*time.Second, "Deployed, Available", func() (bool, error) {
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			return err == nil && k.Status.Phase == v1.KubeVirtPhaseDeployed && conditionOf(k, operator.ConditionAvailable).Status == "True" &&
				conditionOf(k, operator.ConditionProgressing).Status == "False" && k.Status.ObservedKubeVirtVersion == "v1", err
		})
	})

	t.Run("InvalidSpecRefused", func(t *testing.T) {
		_, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"imageTag":"v2; rm -rf /"}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.imageTag") {
			t.Errorf("an invalid imageTag: %v, want Invalid naming spec.imageTag", err)
		}
		_, err = kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"customizeComponents":{"flags":{"handler":{"v; rm -rf /":"1"}}}}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.customizeComponents.flags.handler") {
			t.Errorf("an invalid flag name: %v, want Invalid naming spec.customizeComponents.flags.handler", err)
		}
		_, err = kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"infra":{"replicas":0}}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.infra.replicas") {
			t.Errorf("infra replicas 0: %v, want Invalid naming spec.infra.replicas", err)
		}
	})

	t.Run("Upgrade", func(t *testing.T) {
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"imageTag":"v2"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "v2 applied, Deployed and Progressing", func() (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return d.Spec.Template.Spec.Containers[0].Image == "registry.test/nv/nodevirt-controller:v2" &&
				k.Status.Phase == v1.KubeVirtPhaseDeployed && conditionOf(k, operator.ConditionProgressing).Status == "True" &&
				k.Status.ObservedKubeVirtVersion == "v1" && k.Status.TargetKubeVirtVersion == "v2", nil
		})
		rollOut(t, kube)
		testenv.Eventually(t, 30*time.Second, "v2 observed", func() (bool, error) {
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			return err == nil && k.Status.ObservedKubeVirtVersion == "v2" && conditionOf(k, operator.ConditionProgressing).Status == "False", err
		})
		if ca := checkCertificates(t, kube, dyn); !bytes.Equal(ca, nodeCA) {
			t.Error("the node API CA changed with the upgrade")
		}
	})

	t.Run("CustomizeComponents", func(t *testing.T) {
		patch := `{"spec":{"customizeComponents":{"patches":[{"resourceType":"DaemonSet","resourceName":"nodevirt-agent","type":"strategic",` +
			`"patch":"{\"spec\":{\"template\":{\"spec\":{\"volumes\":[{\"name\":\"kubelet\",\"hostPath\":{\"path\":\"/srv/cluster/nodes\"}}]}}}}"}]}}}`
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the agent's kubelet volume patched", func() (bool, error) {
			ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
			return err == nil && hostPath(ds, "kubelet") == "/srv/cluster/nodes", err
		})
		bad := `{"spec":{"customizeComponents":{"patches":[{"resourceType":"DaemonSet","resourceName":"*","type":"json","patch":"[{\"op\":\"remove\",\"path\":\"/nope\"}]"}]}}}`
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(bad), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "Degraded InvalidSpec naming the patch", func() (bool, error) {
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			return err == nil && conditionOf(k, operator.ConditionDegraded).Reason == operator.ReasonInvalidSpec &&
				strings.Contains(conditionOf(k, operator.ConditionDegraded).Message, "spec.customizeComponents.patches[0]"), err
		})
		ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
		if err != nil || hostPath(ds, "kubelet") != "/srv/cluster/nodes" {
			t.Errorf("an invalid spec changed what runs: %v", err)
		}
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"customizeComponents":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the manifests' volume back, not degraded", func() (bool, error) {
			ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			return err == nil && hostPath(ds, "kubelet") == "/var/lib/kubelet" && conditionOf(k, operator.ConditionDegraded).Status == "False", err
		})
	})

	t.Run("PlacementAndFlags", func(t *testing.T) {
		spec := `{"spec":{` +
			`"infra":{"replicas":3,"nodePlacement":{"nodeSelector":{"node-role.example/infra":"true"},` +
			`"tolerations":[{"key":"infra","operator":"Exists","effect":"NoSchedule"}]}},` +
			`"workloads":{"nodePlacement":{"nodeSelector":{"node-role.example/vms":"true"}}},` +
			`"customizeComponents":{"flags":{"handler":{"log-level":"debug"},"controller":{"kube-api-qps":"80"}}}}}`
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(spec), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "infra and workloads placed, flags set", func() (bool, error) {
			ctl, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			api, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-api", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, d := range []*appsv1.Deployment{ctl, api} {
				p := d.Spec.Template.Spec
				if *d.Spec.Replicas != 3 || p.NodeSelector["node-role.example/infra"] != "true" ||
					!slices.ContainsFunc(p.Tolerations, func(t corev1.Toleration) bool { return t.Key == "infra" }) {
					return false, nil
				}
			}
			p := ds.Spec.Template.Spec
			return p.NodeSelector["node-role.example/vms"] == "true" && p.NodeSelector["node-role.example/infra"] == "" &&
				slices.Contains(p.Containers[0].Args, "--log-level=debug") &&
				slices.Contains(ctl.Spec.Template.Spec.Containers[0].Args, "--kube-api-qps=80"), nil
		})
		if _, err := kvs.Patch(ctx, "kubevirt", types.MergePatchType, []byte(`{"spec":{"infra":null,"workloads":null,"customizeComponents":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "placement and flags gone with the spec", func() (bool, error) {
			ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ctl, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{})
			return err == nil && ds.Spec.Template.Spec.NodeSelector["node-role.example/vms"] == "" &&
				!slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") && *ctl.Spec.Replicas == 2, err
		})
		rollOut(t, kube)
	})

	t.Run("DeleteBlockedByWorkloads", func(t *testing.T) {
		mem := resource.MustParse("64Mi")
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "keep-me"}}
		vmi.Spec.Domain.Memory = &v1.Memory{Guest: &mem}
		if _, err := kv.KubevirtV1().VirtualMachineInstances("default").Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kvs.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "Deleting, blocked", func() (bool, error) {
			k, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			return err == nil && k.Status.Phase == v1.KubeVirtPhaseDeleting && conditionOf(k, operator.ConditionDegraded).Reason == operator.ReasonDeletionBlocked, err
		})
		time.Sleep(3 * time.Second) // past a recheck: still nothing removed
		if _, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{}); err != nil {
			t.Errorf("a component went while a VMI exists: %v", err)
		}
		if err := kv.KubevirtV1().VirtualMachineInstances("default").Delete(ctx, "keep-me", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		took := testenv.Eventually(t, 60*time.Second, "KubeVirt and its components gone", func() (bool, error) {
			_, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, err
			}
			_, err = kube.AppsV1().DaemonSets(ns).Get(ctx, "nodevirt-agent", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		t.Logf("removed %v after the last VMI", took)
		for _, get := range []func() error{
			func() error {
				_, err := kube.AppsV1().Deployments(ns).Get(ctx, "nodevirt-controller", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.RbacV1().ClusterRoles().Get(ctx, "kubevirt.io:view", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "nodevirt-config", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.CoreV1().Secrets(ns).Get(ctx, certsigner.CASecret, metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.CoreV1().Secrets(ns).Get(ctx, operator.APIServingSecret, metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, certrotation.BundleConfigMap, metav1.GetOptions{})
				return err
			},
		} {
			if err := get(); !apierrors.IsNotFound(err) {
				t.Errorf("a component is left: %v", err)
			}
		}
		ext := apiextensionsclient.NewForConfigOrDie(env.Config)
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "virtualmachines.kubevirt.io", metav1.GetOptions{}); err != nil {
			t.Errorf("the CRDs must stay: %v", err)
		}
	})
}

// conditionOf is k's condition typ (zero when it has none).
func conditionOf(k *v1.KubeVirt, typ string) v1.KubeVirtCondition {
	for _, c := range k.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1.KubeVirtCondition{}
}

// hostPath is the host path of ds's volume name.
func hostPath(ds *appsv1.DaemonSet, name string) string {
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

// startOperator renders the manifests, builds the operator and runs it as
// pod podName would, until the test ends.
func startOperator(t *testing.T, kubeconfig, podName string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifests, bin := filepath.Join(dir, "manifests"), filepath.Join(dir, "nodevirt-operator")
	for _, args := range [][]string{
		{"run", "./hack/manifests", "-deploy", "deploy", "-out", manifests},
		{"build", "-o", bin, "./cmd/nodevirt-operator"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", args[0], err, out)
		}
	}
	logPath := filepath.Join(dir, "operator.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", ns, "--manifests", manifests, "--listen=",
		"--lease-duration=2s", "--renew-deadline=1s", "--retry-period=200ms")
	cmd.Env = append(os.Environ(), "POD_NAME="+podName)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // our own child, by pid
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() || testing.Verbose() {
			b, _ := os.ReadFile(logPath)
			t.Logf("operator log:\n%s", tail(string(b), 60))
		}
	})
	go func() {
		select {
		case <-exited:
			if context.Cause(t.Context()) == nil {
				t.Errorf("the operator exited early (see its log)")
			}
		case <-t.Context().Done():
		}
	}()
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkCertificates: the operator made the node API's CA, its bundle and
// nodevirt-api's serving certificate, and the APIServices trust the
// latter's CA. It returns the node CA, which must never change while it
// is valid.
func checkCertificates(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) []byte {
	t.Helper()
	ctx := t.Context()
	var ca *corev1.Secret
	testenv.Eventually(t, 30*time.Second, "the node API CA", func() (bool, error) {
		var err error
		ca, err = kube.CoreV1().Secrets(ns).Get(ctx, certsigner.CASecret, metav1.GetOptions{})
		return err == nil, nil
	})
	if _, err := certsigner.LoadCA(ca.Data[certsigner.CACertKey], ca.Data[certsigner.CAKeyKey]); err != nil {
		t.Errorf("Secret %s: %v", certsigner.CASecret, err)
	}
	bundle, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, certrotation.BundleConfigMap, metav1.GetOptions{})
	if err != nil || bundle.Data[certrotation.BundleKey] != string(ca.Data[certsigner.CACertKey]) {
		t.Errorf("ConfigMap %s is not the CA's certificate: %v", certrotation.BundleConfigMap, err)
	}
	serving, err := kube.CoreV1().Secrets(ns).Get(ctx, operator.APIServingSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	for _, name := range []string{"v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"} {
		as, err := apiServices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b64, _, _ := unstructured.NestedString(as.Object, "spec", "caBundle"); b64 != base64.StdEncoding.EncodeToString(serving.Data["ca.crt"]) {
			t.Errorf("APIService %s: caBundle is not nodevirt-api's serving CA", name)
		}
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serving.Data["ca.crt"])
	b, _ := pem.Decode(serving.Data[corev1.TLSCertKey])
	if b == nil {
		t.Fatal("nodevirt-api-serving: tls.crt is not PEM")
	}
	crt, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crt.Verify(x509.VerifyOptions{DNSName: "nodevirt-api." + ns + ".svc", Roots: roots}); err != nil {
		t.Errorf("nodevirt-api's serving certificate: %v", err)
	}
	return ca.Data[certsigner.CACertKey]
}
