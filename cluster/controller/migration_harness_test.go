package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// The migration tests play the agents' part: the node agent reporting
// Running with LiveMigratable, the target agent and the source agent
// writing their migrationState fields under their field managers.

// runningVM creates a VM whose VMI is Running on node with LiveMigratable
// = migratable (reason when not), returning the VMI.
func (c *cluster) runningVM(t *testing.T, ns, name, node string, migratable bool, strategy *v1.EvictionStrategy) *v1.VirtualMachineInstance {
	t.Helper()
	vm := newVM(ns, name, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.EvictionStrategy = strategy
	c.createVM(t, vm)
	vmi := c.waitVMI(t, ns, name, "")
	c.schedule(t, vmi, node)
	cond := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
	if !migratable {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, v1.ReasonInterfaceNotLiveMigratable, "cannot migrate VMI which does not use masquerade to connect to the pod network"
	}
	c.agentWrite(t, ns, name, v1.ManagerAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.Phase = v1.Running
		s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: v1.Running, PhaseTransitionTimestamp: metav1.Now()})
		s.Conditions = append(s.Conditions, v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}, cond)
	})
	v, err := c.getVMI(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// agentWrite applies, as manager, the manager's fields of the VMI's status
// after mutate (retrying conflicts).
func (c *cluster) agentWrite(t *testing.T, ns, name, manager string, mutate func(*v1.VirtualMachineInstanceStatus)) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s writes vmi %s", manager, name), func() (bool, error) {
		v, err := c.getVMI(ns, name)
		if err != nil {
			return false, err
		}
		s := v.Status.DeepCopy()
		if s.MigrationState == nil {
			s.MigrationState = &v1.VirtualMachineInstanceMigrationState{}
		}
		mutate(s)
		err = v1.ApplyStatus(context.Background(), c.kv.KubevirtV1().VirtualMachineInstances(ns), v, *s, manager)
		return err == nil, err
	})
}

func (c *cluster) migrate(t *testing.T, ns, vmiName string) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	m, err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).Create(context.Background(), &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: vmiName + "-mig-", Namespace: ns},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName, AddedNodeSelector: map[string]string{"zone": "b"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create vmim for %s: %v", vmiName, err)
	}
	return m
}

func (c *cluster) getVMIM(ns, name string) (*v1.VirtualMachineInstanceMigration, error) {
	return c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// waitPhase waits for the VMIM to reach phase.
func (c *cluster) waitPhase(t *testing.T, m *v1.VirtualMachineInstanceMigration, phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	var out *v1.VirtualMachineInstanceMigration
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("vmim %s %s", m.Name, phase), func() (bool, error) {
		v, err := c.getVMIM(m.Namespace, m.Name)
		if err != nil {
			return false, err
		}
		out = v
		return v.Status.Phase == phase, fmt.Errorf("phase %q, conditions %+v", v.Status.Phase, v.Status.Conditions)
	})
	return out
}

// targetPod waits for the migration's target pod and plays scheduler and
// kubelet for it: bound to node, Running.
func (c *cluster) runTargetPod(t *testing.T, m *v1.VirtualMachineInstanceMigration, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := c.waitTargetPod(t, m)
	if err := c.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind target pod %s: %v", pod.Name, err)
	}
	c.podPhase(t, pod.Namespace, pod.Name, corev1.PodRunning)
	p, err := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *cluster) waitTargetPod(t *testing.T, m *v1.VirtualMachineInstanceMigration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, 30*time.Second, "target pod of "+m.Name, func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods(m.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: v1.MigrationJobUIDLabel + "=" + string(m.UID)})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return true, nil
	})
	return pod
}

func (c *cluster) podPhase(t *testing.T, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "pod "+name+" "+string(phase), func() (bool, error) {
		p, err := c.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Status.Phase = phase
		_, err = c.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// waitVMIState waits for the VMI's migrationState to satisfy ok.
func (c *cluster) waitVMIState(t *testing.T, ns, name, what string, ok func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	t.Helper()
	var out *v1.VirtualMachineInstance
	testenv.Eventually(t, 30*time.Second, "vmi "+name+": "+what, func() (bool, error) {
		v, err := c.getVMI(ns, name)
		if err != nil {
			return false, err
		}
		out = v
		return ok(v), fmt.Errorf("labels %v, nodeName %q, migrationState %+v", v.Labels, v.Status.NodeName, v.Status.MigrationState)
	})
	return out
}

// waitGone waits until the VMIM no longer exists.
func (c *cluster) waitVMIMGone(t *testing.T, m *v1.VirtualMachineInstanceMigration) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "vmim "+m.Name+" gone", func() (bool, error) {
		_, err := c.getVMIM(m.Namespace, m.Name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// failedReason is the reason of the VMIM's Failed condition.
func failedReason(m *v1.VirtualMachineInstanceMigration) string {
	for _, c := range m.Status.Conditions {
		if c.Type == "Failed" {
			return c.Reason
		}
	}
	return ""
}

// prepare drives a VMIM of vmi to PreparingTarget with its target on node
// and returns the VMIM.
func (c *cluster) prepareMigration(t *testing.T, vmi *v1.VirtualMachineInstance, node string) (*v1.VirtualMachineInstanceMigration, *corev1.Pod) {
	t.Helper()
	m := c.migrate(t, vmi.Namespace, vmi.Name)
	pod := c.runTargetPod(t, m, node)
	m = c.waitPhase(t, m, v1.MigrationPreparingTarget)
	return m, pod
}

// targetReady plays the target agent: domain ready and listening.
func (c *cluster) targetReady(t *testing.T, ns, name string) {
	c.agentWrite(t, ns, name, v1.ManagerTargetAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.TargetNodeAddress = "10.0.0.2:4444"
		s.MigrationState.TargetNodeDomainReadyTimestamp = ptr.To(metav1.Now())
	})
}

// sourceStarted plays the source agent starting QMP migrate.
func (c *cluster) sourceStarted(t *testing.T, ns, name string) {
	c.agentWrite(t, ns, name, v1.ManagerSourceAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.StartTimestamp = ptr.To(metav1.Now())
		s.MigrationState.Mode = v1.MigrationPreCopy
	})
}
