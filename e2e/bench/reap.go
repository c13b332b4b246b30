package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Reaped runtime: a deleted pod's API object goes once its containers
// stopped, but its dead sandbox stays in containerd until the kubelet's
// container garbage collection, which runs once a minute and then removes
// every dead sandbox at once (50 of them take some 7 s of both cores
// here). A burst that starts while the step before it still has dead
// sandboxes pays for that pass whenever the minute comes round, in
// whichever burst it lands. So each burst also waits until the runtime
// holds no sandbox of the bench namespace (which has no pods then).

// reaped is how a wait for the runtime to drop the bench namespace's dead
// sandboxes ended.
type reaped struct {
	waited time.Duration
	// left is the sandboxes still there when the wait ended.
	left int
}

func (r reaped) String() string {
	if r.left == 0 {
		return fmt.Sprintf("sandboxes reaped after %v", r.waited.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("%d dead sandboxes left after %v", r.left, r.waited.Round(100*time.Millisecond))
}

// waitReaped returns once the node's containerd holds no sandbox of the
// bench namespace, or after max (0: at once) with how many it still held.
func (e *env) waitReaped(ctx context.Context, max time.Duration) (reaped, error) {
	start := time.Now()
	for {
		n, err := e.benchSandboxes(ctx)
		if err != nil {
			return reaped{}, err
		}
		if n == 0 || time.Since(start) >= max {
			return reaped{waited: time.Since(start), left: n}, nil
		}
		select {
		case <-ctx.Done():
			return reaped{}, fmt.Errorf("waiting for the bench's dead sandboxes to go: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// benchSandboxes counts the sandboxes, ready or not, that the node's
// containerd holds for pods of the bench namespace.
func (e *env) benchSandboxes(ctx context.Context) (int, error) {
	filter := `labels."io.cri-containerd.kind"==sandbox,labels."io.kubernetes.pod.namespace"==` + benchNamespace
	out, err := exec.CommandContext(ctx, e.node.CTR, "--address", e.node.Containerd, "-n", "k8s.io", "containers", "ls", "-q", filter).Output()
	if err != nil {
		return 0, fmt.Errorf("list the sandboxes of %s on %s: %w", benchNamespace, e.node.Name, err)
	}
	return len(strings.Fields(string(out))), nil
}
