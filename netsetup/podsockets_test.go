package netsetup

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnsure_ReachesOnlyThePodNetNS: Ensure's steps run on the caller's
// goroutine through sockets and files opened in the pod netns, so what the
// caller's own thread is in does not matter. Called from a thread switched
// into another netns ("node"), Ensure builds the links, the nftables table
// and ip_forward=1 in the pod netns and leaves the node netns as it was.
func TestEnsure_ReachesOnlyThePodNetNS(t *testing.T) {
	requireRoot(t)
	for name, plan := range idempotencyPlans(t) {
		t.Run(name, func(t *testing.T) {
			tp := newTopo(t)
			ctx := context.Background()
			nodeBefore := snapshot(t, tp.node)
			var fwdBefore string
			inNS(t, tp.node, func() error {
				fwdBefore = readIPForward(t)
				_, err := Ensure(ctx, tp.pod, plan)
				return err
			})
			t.Cleanup(func() { _ = Release(ctx, tp.pod, plan) })
			if diff := cmp.Diff(nodeBefore, snapshot(t, tp.node)); diff != "" {
				t.Errorf("caller's netns changed (-before +after):\n%s", diff)
			}
			inNS(t, tp.node, func() error {
				if got := readIPForward(t); got != fwdBefore {
					t.Errorf("caller's ip_forward %s, was %s", got, fwdBefore)
				}
				return nil
			})
			pod := snapshot(t, tp.pod)
			for _, link := range []string{plan.Bridge, plan.Tap} {
				if !slices.ContainsFunc(pod.Links, func(l string) bool { return strings.HasPrefix(l, link+" ") }) {
					t.Errorf("pod netns has no %s: %v", link, pod.Links)
				}
			}
			if plan.Binding == Masquerade {
				if len(pod.Tables) == 0 {
					t.Errorf("pod netns has no nftables table")
				}
				inNS(t, tp.pod, func() error {
					if got := readIPForward(t); got != "1" {
						t.Errorf("pod ip_forward %s, want 1", got)
					}
					return nil
				})
			}
		})
	}
}

// readIPForward reads ip_forward of the calling thread's netns.
func readIPForward(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(ipForward)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
