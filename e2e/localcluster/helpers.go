package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubectlText runs kubectl with stdin (nil: none), bounded by timeout,
// and returns its standard output as text.
func (c *Cluster) KubectlText(timeout time.Duration, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []byte
	var err error
	if stdin != nil {
		out, err = c.Kubectl(ctx, bytes.NewReader(stdin), args...)
	} else {
		out, err = c.Kubectl(ctx, nil, args...)
	}
	return string(out), err
}

// AgentPod returns the nodevirt agent pod on node that is not being
// deleted, failing t when there is none.
func AgentPod(t testing.TB, kube kubernetes.Interface, node string) corev1.Pod {
	t.Helper()
	p, err := FindAgentPod(context.Background(), kube, node)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FindAgentPod is AgentPod for callers that retry (or run outside the
// test's goroutine): it returns the error instead.
func FindAgentPod(ctx context.Context, kube kubernetes.Interface, node string) (corev1.Pod, error) {
	pods, err := kube.CoreV1().Pods("nodevirt").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nodevirt-agent",
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return corev1.Pod{}, fmt.Errorf("agent pods on %s: %w", node, err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return corev1.Pod{}, fmt.Errorf("no agent pod on %s", node)
}
