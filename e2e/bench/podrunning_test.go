package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

func TestWatchPodRunning_KeysLauncherPodsByVMI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kube := fake.NewClientset()
	p, err := watchPodRunning(ctx, kube, vmi.LauncherSelector, vmi.VMIKeyOfPod)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	pods := kube.CoreV1().Pods(benchNamespace)
	launcher := func(name, vmiName string, phase corev1.PodPhase) *corev1.Pod {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace, Labels: map[string]string{v1.AppLabel: v1.LauncherAppValue}},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if vmiName != "" {
			pod.Annotations = map[string]string{v1.DomainAnnotation: vmiName}
		}
		return pod
	}
	for _, pod := range []*corev1.Pod{
		launcher("virt-launcher-a-x", "a", corev1.PodPending),
		launcher("virt-launcher-b-y", "b", corev1.PodRunning),
		launcher("orphan", "", corev1.PodRunning), // no VMI: left out
	} {
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	if _, err := pods.UpdateStatus(ctx, launcher("virt-launcher-a-x", "a", corev1.PodRunning), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, 5*time.Second, 10*time.Millisecond, "both launcher pods Running", func() (bool, error) {
		return p.count() == 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.at(benchNamespace + "/a")
	if !ok || a.Before(before) {
		t.Errorf("VMI a's pod Running at %v (seen %v), want after its status update at %v", a, ok, before)
	}
	if _, ok := p.at(benchNamespace + "/b"); !ok {
		t.Error("VMI b's pod, Running when created, not seen")
	}
	if _, ok := p.at(benchNamespace + "/orphan"); ok {
		t.Error("a pod no VMI owns was keyed")
	}
}
