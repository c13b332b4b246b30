package subresources

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func agentPod(name, node, ip string, phase corev1.PodPhase, ready bool, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "nodevirt", Labels: labels}}
	p.Spec.NodeName = node
	p.Status.Phase, p.Status.PodIP = phase, ip
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	return p
}

func TestPodAgents_AgentIP(t *testing.T) {
	agent := map[string]string{"app.kubernetes.io/name": "nodevirt-agent"}
	kube := kubefake.NewClientset(
		agentPod("a1-old", "n1", "10.0.0.1", corev1.PodRunning, false, agent),
		agentPod("a1-new", "n1", "10.0.0.2", corev1.PodRunning, true, agent),
		agentPod("a2", "n2", "10.0.0.3", corev1.PodRunning, false, agent),
		agentPod("a3", "n3", "", corev1.PodPending, false, agent),
		agentPod("other", "n4", "10.0.0.9", corev1.PodRunning, true, map[string]string{"app": "x"}),
	)
	a, err := NewPodAgents(kube, "nodevirt", DefaultAgentSelector)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"n1": "10.0.0.2", "n2": "10.0.0.3", "n3": "", "n4": "", "n5": ""} {
		ip, err := a.AgentIP(node)
		if want == "" {
			if !errors.Is(err, ErrNoAgent) {
				t.Errorf("%s: got %q, %v; want ErrNoAgent", node, ip, err)
			}
			continue
		}
		if err != nil || ip != want {
			t.Errorf("%s: got %q, %v; want %s", node, ip, err, want)
		}
	}
}
