package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/liveconfig"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// TestIntegration_LiveConfig runs the controller against a real
// kube-apiserver and changes its configuration while it runs: the
// KubeVirt resource's spec.configuration and the ConfigMap are watched,
// and each change is in force for the next VMI's launcher pod while the
// pods of running VMIs stay as they are. Invalid values are refused: by
// the API server at admission (naming the field) for the KubeVirt, by the
// controller (an event, the configuration in force kept, no restart) for
// the ConfigMap; a second KubeVirt is refused by deploy/admission's policy.
func TestIntegration_LiveConfig(t *testing.T) {
	c := startCluster(t)
	leader := c.startReplica(t, "live")
	c.waitLeader(t, "live")
	ns := c.namespace(t, "live")
	ctx := context.Background()
	kvs := c.kv.KubevirtV1().KubeVirts("nodevirt")

	seq := 0
	// launch creates a VMI with two vCPUs and returns its launcher pod.
	launch := func(prefix string) *corev1.Pod {
		t.Helper()
		seq++
		return c.launch(t, ns, fmt.Sprintf("%s-%d", prefix, seq), v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 2}}})
	}
	cpu := func(pod *corev1.Pod) int64 { return pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() }
	// eventually launches VMIs until one's pod satisfies ok: the
	// controller's informer sees a change within moments.
	eventually := func(what string, ok func(*corev1.Pod) bool) {
		t.Helper()
		testenv.Eventually(t, 15*time.Second, what, func() bool { return ok(launch("probe")) })
	}
	event := func(name, reason string) {
		t.Helper()
		testenv.Eventually(t, 15*time.Second, "event "+reason+" on "+name, func() (bool, error) {
			evs, err := c.kube.CoreV1().Events("nodevirt").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == name && e.Reason == reason {
					return true, nil
				}
			}
			return false, nil
		})
	}

	// No KubeVirt yet: KubeVirt's default ratio 10 (two vCPUs request
	// 200m) and the deployed ConfigMap's useEmulation auto, which without
	// KVM nodes is TCG.
	first := launch("before")
	if got := cpu(first); got != 200 || v1.RequestsKVM(first) {
		t.Fatalf("before any KubeVirt: cpu request %dm, kvm %t; want 200m under TCG", got, v1.RequestsKVM(first))
	}

	t.Run("InvalidRefusedAtAdmission", func(t *testing.T) {
		for field, kv := range map[string]v1.KubeVirtConfiguration{
			"spec.configuration.developerConfiguration.cpuAllocationRatio": {DeveloperConfiguration: &v1.DeveloperConfiguration{CPUAllocationRatio: -1}},
			"spec.configuration.evictionStrategy":                          {EvictionStrategy: ptr.To(v1.EvictionStrategy("Evict"))},
			"spec.configuration.imagePullPolicy":                           {ImagePullPolicy: "Sometimes"},
		} {
			_, err := kvs.Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}, Spec: v1.KubeVirtSpec{Configuration: kv}}, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Errorf("invalid %s: err = %v, want a refusal naming the field", field, err)
				_ = kvs.Delete(ctx, "kubevirt", metav1.DeleteOptions{})
			}
		}
	})

	t.Run("KubeVirtChangesTakeEffect", func(t *testing.T) {
		_, err := kvs.Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}, Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{
			DeveloperConfiguration: &v1.DeveloperConfiguration{CPUAllocationRatio: 4},
		}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually("a pod requesting 500m (ratio 4)", func(p *corev1.Pod) bool { return cpu(p) == 500 })
		event("kubevirt", liveconfig.ReasonApplied)

		// KVM only, set live over the ConfigMap's auto.
		kv, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv.Spec.Configuration.DeveloperConfiguration.UseEmulation = ptr.To(false)
		if _, err := kvs.Update(ctx, kv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually("a pod requesting /dev/kvm (useEmulation false)", func(p *corev1.Pod) bool { return v1.RequestsKVM(p) && cpu(p) == 500 })

		// The cluster's default eviction strategy decides for VMIs that
		// exist: LiveMigrate gives the first VMI a disruption budget.
		kv, err = kvs.Get(ctx, "kubevirt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv.Spec.Configuration.EvictionStrategy = ptr.To(v1.EvictionStrategyLiveMigrate)
		if _, err := kvs.Update(ctx, kv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		budget := v1.CreatedByLabel + "=" + first.Labels[v1.CreatedByLabel]
		testenv.Eventually(t, 15*time.Second, "a disruption budget for the first VMI (evictionStrategy LiveMigrate)", func() (bool, error) {
			pdbs, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{LabelSelector: budget})
			return err == nil && len(pdbs.Items) == 1, err
		})

		// The running VMI's pod is the one it started with.
		now, err := c.kube.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil || now.UID != first.UID || cpu(now) != 200 || v1.RequestsKVM(now) {
			t.Errorf("the first VMI's pod after the changes: %v, %v", now, err)
		}
	})

	t.Run("BadConfigMapChangeRefused", func(t *testing.T) {
		cm, err := c.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, "nodevirt-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		good := cm.Data["useEmulation"]
		cm.Data["useEmulation"] = "not-a-bool"
		if _, err := c.kube.CoreV1().ConfigMaps("nodevirt").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cm, err := c.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, "nodevirt-config", metav1.GetOptions{})
			if err == nil {
				cm.Data["useEmulation"] = good
				_, err = c.kube.CoreV1().ConfigMaps("nodevirt").Update(ctx, cm, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Errorf("restore the ConfigMap: %v", err)
			}
		}()
		event("nodevirt-config", liveconfig.ReasonRefused)
		if p := launch("after-bad"); !v1.RequestsKVM(p) || cpu(p) != 500 {
			t.Errorf("after a refused change: kvm %t, cpu %dm; want the configuration in force (KVM, 500m)", v1.RequestsKVM(p), cpu(p))
		}
		select {
		case <-leader.exited:
			t.Fatal("the controller exited on a bad ConfigMap change")
		default:
		}
		if h := c.leaseHolder(); h != "live" {
			t.Errorf("lease holder %q, want live", h)
		}
	})

	t.Run("SecondKubeVirtRefused", func(t *testing.T) {
		apiserver.InstallAdmissionPolicy(t, c.kube, "kubevirt-singleton.yaml")
		second := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "second"}}
		testenv.Eventually(t, 30*time.Second, "a second KubeVirt refused", func() bool {
			_, err := kvs.Create(ctx, second, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), "a cluster has one KubeVirt, nodevirt/kubevirt")
		})
		_, err := c.kv.KubevirtV1().KubeVirts(ns).Create(ctx, &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "metadata.name: a cluster has one KubeVirt") {
			t.Errorf("a KubeVirt in namespace %s: %v, want a refusal", ns, err)
		}
		if p := launch("second"); cpu(p) != 500 {
			t.Errorf("after the refusals: cpu %dm, want the first KubeVirt's 500m", cpu(p))
		}
	})

	t.Run("DeletedBackToConfigMap", func(t *testing.T) {
		if err := kvs.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually("a pod as the ConfigMap says (200m, auto: TCG)", func(p *corev1.Pod) bool { return cpu(p) == 200 && !v1.RequestsKVM(p) })
	})
}
