package launchspec

import (
	"fmt"
	"regexp"
	"time"
	// The launcher image has no /usr/share/zoneinfo: zone names resolve
	// from the copy embedded in the binary.
	_ "time/tzdata"
)

// RTC is a guest clock base that depends on the time QEMU starts: UTC plus
// an offset, or the local time of a zone. QEMU takes such a base only as a
// date and time (-rtc base=2006-01-02T15:04:05), so the launch spec carries
// the rule and the launcher computes the value when it starts QEMU (Args
// already hold "-rtc base=utc,…"; QEMU merges a later -rtc into it).
type RTC struct {
	// OffsetSeconds is added to UTC (spec.domain.clock.utc.offsetSeconds).
	OffsetSeconds int64 `json:"offsetSeconds,omitempty"`
	// Timezone is a tz database name (spec.domain.clock.timezone); when
	// set, OffsetSeconds is zero.
	Timezone string `json:"timezone,omitempty"`
}

// zoneRE is the shape of a tz database name; it keeps "..", "," and
// absolute paths out (time.LoadLocation also refuses them).
var zoneRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`)

// Validate checks the zone name and that the zone exists.
func (r RTC) Validate() error {
	if r.Timezone == "" {
		return nil
	}
	if r.OffsetSeconds != 0 {
		return fmt.Errorf("rtc: both a timezone and an offset")
	}
	if len(r.Timezone) > 64 || !zoneRE.MatchString(r.Timezone) {
		return fmt.Errorf("rtc: timezone %q is not a tz database name", r.Timezone)
	}
	if _, err := time.LoadLocation(r.Timezone); err != nil {
		return fmt.Errorf("rtc: timezone %q: %w", r.Timezone, err)
	}
	return nil
}

// Base returns the -rtc value that starts the guest clock at r's time when
// QEMU starts at now: "base=YYYY-MM-DDTHH:MM:SS".
func (r RTC) Base(now time.Time) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	t := now.UTC().Add(time.Duration(r.OffsetSeconds) * time.Second)
	if r.Timezone != "" {
		loc, _ := time.LoadLocation(r.Timezone) // checked by Validate
		t = now.In(loc)
	}
	return "base=" + t.Format("2006-01-02T15:04:05"), nil
}
