package netsetup

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func idempotencyPlans(t testing.TB) map[string]Plan {
	return map[string]Plan{
		"masquerade": mustPlan(t, Input{VMIUID: "u", InterfaceName: "default", Binding: Masquerade, UID: 107, GID: 107,
			Ports: []Port{{Port: 80}}}),
		"bridge": mustPlan(t, Input{VMIUID: "u", InterfaceName: "default", Binding: Bridge, UID: 107, GID: 107}),
	}
}

// TestEnsure_Idempotent: a second Ensure changes nothing and returns the
// same result.
func TestEnsure_Idempotent(t *testing.T) {
	requireRoot(t)
	for name, plan := range idempotencyPlans(t) {
		t.Run(name, func(t *testing.T) {
			tp := newTopo(t)
			ctx := context.Background()
			first, err := Ensure(ctx, tp.pod, plan)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = Release(ctx, tp.pod, plan) })
			if len(first.Changed) == 0 {
				t.Errorf("first Ensure reported no change on a fresh netns")
			}
			after1 := snapshot(t, tp.pod)
			start := time.Now()
			second, err := Ensure(ctx, tp.pod, plan)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("converged Ensure took %v", time.Since(start))
			if len(second.Changed) != 0 {
				t.Errorf("second Ensure changed %v, want nothing", second.Changed)
			}
			first.Changed, second.Changed = nil, nil
			if diff := cmp.Diff(fmt.Sprint(first), fmt.Sprint(second)); diff != "" {
				t.Errorf("results differ (-first +second):\n%s", diff)
			}
			if diff := cmp.Diff(after1, snapshot(t, tp.pod)); diff != "" {
				t.Errorf("netns changed by second Ensure (-first +second):\n%s", diff)
			}
		})
	}
}

// TestEnsure_ConvergesFromEveryPartialState simulates a crash after each
// step k: Release from there leaves the netns as it was, and Ensure from
// there converges to exactly what an uninterrupted Ensure builds.
func TestEnsure_ConvergesFromEveryPartialState(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	for name, plan := range idempotencyPlans(t) {
		t.Run(name, func(t *testing.T) {
			ref := newTopo(t)
			clean := snapshot(t, ref.pod)
			want, err := Ensure(ctx, ref.pod, plan)
			if err != nil {
				t.Fatal(err)
			}
			built := snapshot(t, ref.pod)
			if err := Release(ctx, ref.pod, plan); err != nil {
				t.Fatal(err)
			}
			want.Changed = nil

			tp := newTopo(t)
			all := steps(plan)
			for k := 0; k <= len(all); k++ {
				last := "none"
				if k > 0 {
					last = all[k-1].name
				}
				t.Run(fmt.Sprintf("after-%d-%s", k, last), func(t *testing.T) {
					if _, err := ensureSteps(ctx, tp.pod, plan, k); err != nil {
						t.Fatalf("first %d steps: %v", k, err)
					}
					if err := Release(ctx, tp.pod, plan); err != nil {
						t.Fatalf("Release after %d steps: %v", k, err)
					}
					if diff := cmp.Diff(clean, snapshot(t, tp.pod)); diff != "" {
						t.Fatalf("Release after %d steps left (-clean +got):\n%s", k, diff)
					}
					if _, err := ensureSteps(ctx, tp.pod, plan, k); err != nil {
						t.Fatalf("first %d steps again: %v", k, err)
					}
					got, err := Ensure(ctx, tp.pod, plan)
					if err != nil {
						t.Fatalf("Ensure after %d steps: %v", k, err)
					}
					got.Changed = nil
					if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); diff != "" {
						t.Errorf("result (-uninterrupted +resumed):\n%s", diff)
					}
					if diff := cmp.Diff(built, snapshot(t, tp.pod)); diff != "" {
						t.Errorf("netns (-uninterrupted +resumed):\n%s", diff)
					}
					if err := Release(ctx, tp.pod, plan); err != nil {
						t.Fatalf("final Release: %v", err)
					}
					if diff := cmp.Diff(clean, snapshot(t, tp.pod)); diff != "" {
						t.Fatalf("final Release left (-clean +got):\n%s", diff)
					}
				})
			}
		})
	}
}

func TestEnsure_Errors(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	tp := newTopo(t)
	tests := []struct {
		name string
		in   Input
		want error
	}{
		{"guest subnet overlaps the pod's", Input{InterfaceName: "a", Binding: Masquerade, VMNetworkCIDR: "10.200.0.0/16"}, ErrInvalidInput},
		{"no pod interface", Input{InterfaceName: "a", Binding: Masquerade, PodInterface: "eth9"}, ErrLinkNotFound},
		{"no pod interface (bridge)", Input{InterfaceName: "a", Binding: Bridge, PodInterface: "eth9"}, ErrLinkNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := mustPlan(t, tt.in)
			if _, err := Ensure(ctx, tp.pod, plan); !errors.Is(err, tt.want) {
				t.Errorf("Ensure() error = %v, want %v", err, tt.want)
			}
			if err := Release(ctx, tp.pod, plan); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
	t.Run("pod interface without address", func(t *testing.T) {
		run(t, "ip", "-n", tp.podName, "addr", "flush", "dev", "eth0")
		for _, b := range []Binding{Masquerade, Bridge} {
			plan := mustPlan(t, Input{InterfaceName: "a", Binding: b})
			if _, err := Ensure(ctx, tp.pod, plan); !errors.Is(err, ErrNoPodAddress) {
				t.Errorf("%s: Ensure() error = %v, want ErrNoPodAddress", b, err)
			}
			if err := Release(ctx, tp.pod, plan); err != nil {
				t.Errorf("%s: Release: %v", b, err)
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		plan := mustPlan(t, Input{InterfaceName: "a", Binding: Masquerade})
		if _, err := Ensure(cctx, tp.pod, plan); !errors.Is(err, context.Canceled) {
			t.Errorf("Ensure() error = %v, want context.Canceled", err)
		}
	})
}
