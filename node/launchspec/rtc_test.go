package launchspec

import (
	"testing"
	"time"
)

func TestRTC_Base(t *testing.T) {
	now := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rtc  RTC
		want string
	}{
		{"offset", RTC{OffsetSeconds: 3600}, "base=2026-01-15T13:00:00"},
		{"negative offset", RTC{OffsetSeconds: -86400}, "base=2026-01-14T12:00:00"},
		{"zone in winter", RTC{Timezone: "Europe/Berlin"}, "base=2026-01-15T13:00:00"},
		{"zone with three parts", RTC{Timezone: "America/Argentina/Buenos_Aires"}, "base=2026-01-15T09:00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rtc.Base(now)
			if err != nil || got != tt.want {
				t.Errorf("Base = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRTC_ValidateRefuses(t *testing.T) {
	for _, r := range []RTC{
		{Timezone: "Europe/Paris,clock=vm"},
		{Timezone: "../../etc/passwd"},
		{Timezone: "/etc/localtime"},
		{Timezone: "Mars/Olympus_Mons"},
		{Timezone: "Europe/Paris", OffsetSeconds: 1},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", r)
		}
	}
}
