package heartbeat_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
	"github.com/nodevirt/nodevirt/node/heartbeat"
)

// TestHeartbeat_RealAPIServer runs the heartbeat against a real API server:
// the label and annotation appear, the annotation refreshes, other labels
// survive, and a clean stop sets schedulable=false.
func TestHeartbeat_RealAPIServer(t *testing.T) {
	env := apiserver.Start(t)
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "node-hb",
		Labels:      map[string]string{"keep": "label"},
		Annotations: map[string]string{"keep": "annotation"},
	}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	hb, err := heartbeat.New(heartbeat.Config{NodeName: node.Name, Interval: 300 * time.Millisecond}, client.CoreV1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- hb.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	first := waitNode(t, ctx, client, node.Name, func(n *corev1.Node) bool {
		return n.Labels[v1.SchedulableLabel] == "true" && n.Annotations[v1.HeartbeatAnnotation] != ""
	})
	t.Logf("MEASURE heartbeat start -> node schedulable: %v", time.Since(start).Round(time.Millisecond))
	beat := first.Annotations[v1.HeartbeatAnnotation]
	if _, err := time.Parse(time.RFC3339, beat); err != nil {
		t.Errorf("heartbeat annotation %q: %v", beat, err)
	}
	// RFC 3339 has whole seconds: a refresh shows within about a second.
	refreshed := waitNode(t, ctx, client, node.Name, func(n *corev1.Node) bool {
		return n.Annotations[v1.HeartbeatAnnotation] != beat
	})
	if a, b := mustParse(t, beat), mustParse(t, refreshed.Annotations[v1.HeartbeatAnnotation]); !b.After(a) {
		t.Errorf("heartbeat went from %s to %s, want later", a, b)
	}

	stop()
	if err := <-done; err != nil {
		t.Errorf("Run() after stop = %v, want nil", err)
	}
	done <- nil // for the cleanup
	final, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := final.Labels[v1.SchedulableLabel]; got != "false" {
		t.Errorf("after stop %s = %q, want false", v1.SchedulableLabel, got)
	}
	if final.Labels["keep"] != "label" || final.Annotations["keep"] != "annotation" {
		t.Errorf("other metadata changed: labels %v annotations %v", final.Labels, final.Annotations)
	}
}

func waitNode(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(n) {
			return n
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s: condition not met (last error %v, node %+v)", name, err, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
