package convert

import (
	"fmt"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// timers returns clock.timer or nil.
func timers(c *v1.Clock) *v1.Timer {
	if c == nil {
		return nil
	}
	return c.Timer
}

// clock adds -rtc (the guest clock base, RTC tick policy and track) and
// the PIT's lost-tick policy. A base that depends on the start time (an
// offset or a zone) goes into the spec's RTC for the launcher.
func (b *builder) clock() error {
	c := b.vmi.Spec.Domain.Clock
	if c == nil {
		// QEMU's default is KubeVirt's: base=utc.
		return nil
	}
	opts := []string{"base=utc"}
	switch {
	case c.UTC != nil && c.Timezone != nil:
		return fmt.Errorf("%w: spec.domain.clock: both utc and timezone are set", ErrInvalid)
	case c.Timezone != nil:
		r := launchspec.RTC{Timezone: string(*c.Timezone)}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: spec.domain.clock.timezone: %w", ErrInvalid, err)
		}
		b.rtc = &r
	case c.UTC != nil && c.UTC.OffsetSeconds != nil && *c.UTC.OffsetSeconds != 0:
		const tenYears = 315576000
		off := *c.UTC.OffsetSeconds
		if off < -tenYears || off > tenYears {
			return fmt.Errorf("%w: spec.domain.clock.utc.offsetSeconds %d out of range", ErrInvalid, off)
		}
		b.rtc = &launchspec.RTC{OffsetSeconds: int64(off)}
	}
	t := c.Timer
	if t != nil && t.RTC != nil {
		switch t.RTC.Track {
		case "":
		case v1.TrackGuest:
			opts = append(opts, "clock=vm")
		case v1.TrackWall:
			opts = append(opts, "clock=host")
		default:
			return fmt.Errorf("%w: spec.domain.clock.timer.rtc.track %q", ErrUnsupported, t.RTC.Track)
		}
		switch t.RTC.TickPolicy {
		case "", v1.RTCTickPolicyDelay:
		case v1.RTCTickPolicyCatchup:
			opts = append(opts, "driftfix=slew")
		default:
			return fmt.Errorf("%w: spec.domain.clock.timer.rtc.tickPolicy %q", ErrUnsupported, t.RTC.TickPolicy)
		}
	}
	b.add("-rtc", strings.Join(opts, ","))
	if t != nil && t.PIT != nil && t.PIT.TickPolicy != "" {
		// Only the in-kernel PIT (KVM) has a lost-tick policy; QEMU's
		// own PIT under TCG has none. kvm-pit knows delay (re-inject the
		// missed ticks, which is also what catchup asks for) and discard.
		var policy string
		switch t.PIT.TickPolicy {
		case v1.PITTickPolicyDelay, v1.PITTickPolicyCatchup:
			policy = "delay"
		case v1.PITTickPolicyDiscard:
			policy = "discard"
		default:
			return fmt.Errorf("%w: spec.domain.clock.timer.pit.tickPolicy %q", ErrUnsupported, t.PIT.TickPolicy)
		}
		if b.kvm {
			b.add("-global", "kvm-pit.lost_tick_policy="+policy)
		}
	}
	if t != nil && t.HPET != nil {
		switch t.HPET.TickPolicy {
		case "", v1.HPETTickPolicyDelay, v1.HPETTickPolicyCatchup, v1.HPETTickPolicyMerge, v1.HPETTickPolicyDiscard:
		default:
			return fmt.Errorf("%w: spec.domain.clock.timer.hpet.tickPolicy %q", ErrUnsupported, t.HPET.TickPolicy)
		}
	}
	return nil
}
