package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// barePodLabel marks the burst's floor pods: the bare pods (one container
// of the pause image, the same node and CPU request as the burst's VMIs)
// and the launcher-shaped pods (launchershape.go).
const barePodLabel = "nodevirt.io/bench-bare-pod"

// barePod is the floor's pod: what the kubelet must do for any pod.
func (e *env) barePod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{barePodLabel: "true"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: e.node.Name},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name: "pause", Image: "nodevirt.local/pause:dev", ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}},
			}},
		},
	}
}

// floorPodBurst creates n floor pods, newPod's, interval apart (name
// prefix) and returns each one's creation → Running (phase Running as
// this client's watch saw it) and, with meter, the node's CPU time and
// the API requests from the first creation until all ran, then deletes
// them and waits until they are gone. newPod's pods must carry
// barePodLabel.
func floorPodBurst(ctx context.Context, e *env, prefix string, n int, interval time.Duration, newPod func(name string) *corev1.Pod, meter bool) ([]time.Duration, stepUse, error) {
	pods := e.kube.CoreV1().Pods(benchNamespace)
	running, err := watchPodRunning(ctx, e.kube, barePodLabel+"=true", podName)
	if err != nil {
		return nil, stepUse{}, err
	}
	defer running.stop()
	created := map[string]time.Time{}
	use, err := e.startStepMeter(ctx, meter)
	if err != nil {
		return nil, stepUse{}, err
	}
	for i := range n {
		if i > 0 && interval > 0 {
			time.Sleep(interval)
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		created[name] = time.Now()
		if _, err := pods.Create(ctx, newPod(name), metav1.CreateOptions{}); err != nil {
			_, _ = use.Stop(ctx)
			return nil, stepUse{}, fmt.Errorf("create floor pod %s: %w", name, err)
		}
	}
	err = poll(ctx, 10*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d %s pods Running", n, prefix), func() (bool, error) {
		return running.count() >= n, nil
	})
	if err != nil {
		_, _ = use.Stop(ctx)
		return nil, stepUse{}, err
	}
	used, err := use.Stop(ctx)
	if err != nil {
		return nil, stepUse{}, err
	}
	out := make([]time.Duration, 0, n)
	for name, at := range created {
		run, _ := running.at(name)
		out = append(out, run.Sub(at))
	}
	return out, used, e.deleteFloorPods(ctx)
}

// deleteFloorPods deletes every floor pod and waits until none is left.
func (e *env) deleteFloorPods(ctx context.Context) error {
	pods := e.kube.CoreV1().Pods(benchNamespace)
	sel := metav1.ListOptions{LabelSelector: barePodLabel + "=true"}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel); err != nil {
		return fmt.Errorf("delete floor pods: %w", err)
	}
	return poll(ctx, 5*time.Minute, 200*time.Millisecond, "floor pods gone", func() (bool, error) {
		l, err := pods.List(ctx, sel)
		if err != nil {
			return false, err
		}
		return len(l.Items) == 0, nil
	})
}
