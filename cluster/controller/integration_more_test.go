package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

func (c *cluster) launcherPod(t *testing.T, vmi *v1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, 30*time.Second, "launcher pod of "+vmi.Name, func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods(vmi.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return true, nil
	})
	return pod
}

func testImagePullError(t *testing.T, c *cluster) {
	ns := c.namespace(t, "imagepull")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyAlways))
	vmi := c.waitVMI(t, ns, "vm", "")
	pod := c.launcherPod(t, vmi)
	if pod.Spec.Containers[0].Image != "nodevirt.local/nodevirt-launcher:dev" {
		t.Errorf("compute image = %q", pod.Spec.Containers[0].Image)
	}
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff"} {
		testenv.Eventually(t, 10*time.Second, "pod status "+reason, func() (bool, error) {
			p, err := c.kube.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute", Image: "x",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "no registry"}}}}
			_, err = c.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			return err == nil, err
		})
		c.waitPrintable(t, ns, "vm", v1.VirtualMachinePrintableStatus(reason))
	}
}

func testPodDeletedBeforeHandoff(t *testing.T, c *cluster) {
	ns := c.namespace(t, "poddeleted")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyOnce))
	vmi := c.waitVMI(t, ns, "vm", "")
	pod := c.launcherPod(t, vmi)
	testenv.Eventually(t, 10*time.Second, "vmi Scheduling", func() (bool, error) {
		v, err := c.getVMI(ns, "vm")
		return err == nil && v.Status.Phase == v1.Scheduling, err
	})
	if err := c.kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "vmi Failed", func() (bool, error) {
		v, err := c.getVMI(ns, "vm")
		return err == nil && v.Status.Phase == v1.Failed && v.Status.Reason != "", err
	})
}

// testHeartbeatStaleOnArrival: a node whose heartbeat is already older
// than the threshold when the controller first sees it (the controller
// just started, or the API server was away and the agent could not beat)
// gets a full threshold from then before it is marked unschedulable.
func testHeartbeatStaleOnArrival(t *testing.T, c *cluster) {
	ctx := context.Background()
	created := time.Now()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-hb-stale",
		Labels:      map[string]string{v1.SchedulableLabel: "true"},
		Annotations: map[string]string{v1.HeartbeatAnnotation: created.Add(-time.Hour).UTC().Format(time.RFC3339)}}}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "node unschedulable", func() (bool, error) {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && n.Labels[v1.SchedulableLabel] == "false", err
	})
	// The controller runs with heartbeatThreshold 4s.
	if d := time.Since(created); d < 4*time.Second {
		t.Errorf("marked %v after the controller first saw its hour-old heartbeat, want a full threshold (4s) first", d.Round(100*time.Millisecond))
	}
}

// testNodeUnresponsive plays an agent that stops heartbeating (the
// controller runs with heartbeatThreshold 4s from its ConfigMap).
func testNodeUnresponsive(t *testing.T, c *cluster) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-hb",
		Labels:      map[string]string{v1.SchedulableLabel: "true"},
		Annotations: map[string]string{v1.HeartbeatAnnotation: time.Now().UTC().Format(time.RFC3339)}}}
	node, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := c.namespace(t, "heartbeat")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyOnce))
	vmi := c.waitVMI(t, ns, "vm", "")
	c.schedule(t, vmi, "node-hb")
	c.agentPhase(t, ns, "vm", v1.Running)

	start := time.Now()
	testenv.Eventually(t, 30*time.Second, "node unschedulable", func() (bool, error) {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, "node-hb", metav1.GetOptions{})
		return err == nil && n.Labels[v1.SchedulableLabel] == "false", err
	})
	t.Logf("node marked unschedulable %s after the last heartbeat", time.Since(start).Round(100*time.Millisecond))
	// Node still Ready and the pod still there: the VMI is left alone.
	if v, _ := c.getVMI(ns, "vm"); v.Status.Phase != v1.Running {
		t.Fatalf("vmi phase = %s while its pod exists on a Ready node", v.Status.Phase)
	}
	// The node goes NotReady: the VMI fails as NodeUnresponsive.
	testenv.Eventually(t, 10*time.Second, "node NotReady", func() (bool, error) {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, "node-hb", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		_, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	})
	testenv.Eventually(t, 30*time.Second, "vmi Failed NodeUnresponsive", func() (bool, error) {
		v, err := c.getVMI(ns, "vm")
		return err == nil && v.Status.Phase == v1.Failed && v.Status.Reason == v1.ReasonNodeUnresponsive, err
	})
	// Deleting it needs no agent: the controller releases the finalizer and
	// deletes the pod (which, on a dead node, stays Terminating like any pod
	// there until the node comes back or is removed).
	if err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Delete(ctx, "vm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "vmi gone, pod deleted", func() (bool, error) {
		v, err := c.getVMI(ns, "vm")
		if err == nil && v.UID == vmi.UID {
			return false, fmt.Errorf("vmi still there: finalizers %v, phase %s", v.Finalizers, v.Status.Phase)
		}
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Errorf("pods: %v, %d", err, len(pods.Items))
		}
		return pods.Items[0].DeletionTimestamp != nil, fmt.Errorf("pod not deleted")
	})
}

func testMetrics(t *testing.T, addr string) {
	var body string
	testenv.Eventually(t, 10*time.Second, "metrics", func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK, err
	})
	for _, want := range []string{
		`kubevirt_vmi_phase_transition_time_from_creation_seconds_count{phase="Pending"}`,
		`kubevirt_vmi_phase_transition_time_from_creation_seconds_count{phase="Scheduled"}`,
		`nodevirt_controller_queue_depth{controller="vmi"}`,
		`nodevirt_controller_sync_duration_seconds_count{controller="vm",result="success"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}
}
