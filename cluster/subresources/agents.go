package subresources

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Defaults of the agents' pods (deploy/agent/daemonset.yaml).
const (
	DefaultAgentNamespace = "nodevirt"
	DefaultAgentSelector  = "app.kubernetes.io/name=nodevirt-agent"
)

const nodeIndex = "spec.nodeName"

// PodAgents locates node agents by their pods: an informer on the pods
// matching a label selector in one namespace, indexed by node.
type PodAgents struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

// NewPodAgents watches the pods of namespace matching selector.
func NewPodAgents(kube kubernetes.Interface, namespace, selector string) (*PodAgents, error) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	err := inf.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("agent pod index: %w", err)
	}
	return &PodAgents{factory: f, informer: inf}, nil
}

// Start starts the informer and waits until its cache is filled or ctx
// ends. It returns at once; the informer runs until ctx ends.
func (a *PodAgents) Start(ctx context.Context) error {
	a.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced) {
		return fmt.Errorf("agent pods: cache not synced: %w", ctx.Err())
	}
	return nil
}

// HasSynced reports whether the pod cache is filled (readiness).
func (a *PodAgents) HasSynced() bool { return a.informer.HasSynced() }

// AgentIP returns the pod IP of a running agent of node, preferring a
// Ready one (during a rolling update the old and new pods overlap).
func (a *PodAgents) AgentIP(node string) (string, error) {
	objs, err := a.informer.GetIndexer().ByIndex(nodeIndex, node)
	if err != nil {
		return "", fmt.Errorf("agent of node %s: %w", node, err)
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	if ip := pickAgent(pods); ip != "" {
		return ip, nil
	}
	return "", fmt.Errorf("node %s: %w", node, ErrNoAgent)
}

// pickAgent chooses among a node's agent pods: a Ready running pod with an
// IP, else any running one with an IP.
func pickAgent(pods []*corev1.Pod) string {
	fallback := ""
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		if podReady(p) {
			return p.Status.PodIP
		}
		if fallback == "" {
			fallback = p.Status.PodIP
		}
	}
	return fallback
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
