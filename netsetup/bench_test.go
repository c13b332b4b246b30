package netsetup

import (
	"context"
	"testing"
)

// BenchmarkEnsure_Converged is the agent's re-adoption and resync path:
// Ensure on a netns that already holds the plan's network, which only
// reads (links, addresses, nftables rules) and changes nothing. Its floor,
// measured beside it, is entering the netns and reading one link there.
func BenchmarkEnsure_Converged(b *testing.B) {
	requireRoot(b)
	ctx := context.Background()
	b.Run("floor", func(b *testing.B) {
		tp := newTopo(b)
		b.ReportAllocs()
		for b.Loop() {
			err := inNetNS(ctx, tp.pod, func() error {
				return withRTNL(func(rt rtnl) error {
					_, err := rt.mustLink("eth0")
					return err
				})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, plan := range idempotencyPlans(b) {
		b.Run(name, func(b *testing.B) {
			tp := newTopo(b)
			if _, err := Ensure(ctx, tp.pod, plan); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = Release(ctx, tp.pod, plan) })
			b.ReportAllocs()
			for b.Loop() {
				r, err := Ensure(ctx, tp.pod, plan)
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Changed) != 0 {
					b.Fatalf("converged Ensure changed %v", r.Changed)
				}
			}
		})
	}
}
