package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podRunning records when this client's watch first saw each of a set of
// pods in phase Running, by a key of the pod (its name, or for a launcher
// pod its VMI's namespace/name, vmi.VMIKeyOfPod): the kubelet's report that the pod runs, on the
// clock the other latencies are taken on.
type podRunning struct {
	w    watch.Interface
	done chan struct{}

	mu      sync.Mutex
	running map[string]time.Time
}

// watchPodRunning starts watching the benchmark namespace's pods that
// match selector; key names a pod, "" for one to leave out.
func watchPodRunning(ctx context.Context, kube kubernetes.Interface, selector string, key func(*corev1.Pod) string) (*podRunning, error) {
	w, err := kube.CoreV1().Pods(benchNamespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("watch pods %s: %w", selector, err)
	}
	p := &podRunning{w: w, done: make(chan struct{}), running: map[string]time.Time{}}
	go func() {
		defer close(p.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || pod.Status.Phase != corev1.PodRunning {
				continue
			}
			k := key(pod)
			if k == "" {
				continue
			}
			p.mu.Lock()
			if _, seen := p.running[k]; !seen {
				p.running[k] = time.Now()
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// count is how many pods were seen Running.
func (p *podRunning) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.running)
}

// at is when the pod of key was first seen Running.
func (p *podRunning) at(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.running[key]
	return t, ok
}

// stop ends the watch.
func (p *podRunning) stop() {
	p.w.Stop()
	<-p.done
}

// podName keys a pod by its name.
func podName(pod *corev1.Pod) string { return pod.Name }
