package qmp_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// BenchmarkQEMU measures, on one booted test guest under TCG, the QMP
// stop+cont round trip and the guest agent ping. Besides ns/op it reports
// the median and p99 of single operations.
func BenchmarkQEMU(b *testing.B) {
	vm := startVM(b, vmConfig{})
	c := vm.DialQMP(b)
	vm.WaitSerial(b, readyMarker, 1, bootTimeout)
	a := vm.DialAgent(b)

	b.Run("PauseResume", func(b *testing.B) {
		ctx := ctxT(b, 10*time.Minute)
		events := c.Subscribe(4, qmp.EventStop, qmp.EventResume)
		defer events.Close()
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := c.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			if err := c.Cont(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			// Drain so the small buffer never overflows.
			for len(events.Events()) > 0 {
				<-events.Events()
			}
		}
		reportLatency(b, lat)
	})

	b.Run("GuestPing", func(b *testing.B) {
		ctx := ctxT(b, 10*time.Minute)
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := a.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportLatency(b, lat)
	})
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}
