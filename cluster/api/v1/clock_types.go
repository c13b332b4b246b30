package v1

// Clock is the guest's real-time clock and its timers.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.utc) && has(self.timezone))",message="spec.domain.clock: at most one of utc and timezone may be set"
type Clock struct {
	// ClockOffset is the RTC's base: UTC (with an optional offset) or a
	// time zone.
	ClockOffset `json:",inline"`
	// Timer lists the timers the guest gets.
	// +optional
	Timer *Timer `json:"timer,omitempty"`
}

// ClockOffset is the guest RTC's offset; at most one member is set.
type ClockOffset struct {
	// UTC starts the guest clock at UTC (+ offsetSeconds).
	// +optional
	UTC *ClockOffsetUTC `json:"utc,omitempty"`
	// Timezone starts the guest clock at the local time of a tz database
	// zone, e.g. "Europe/Berlin".
	// +optional
	Timezone *ClockOffsetTimezone `json:"timezone,omitempty"`
}

// ClockOffsetUTC is a UTC guest clock.
type ClockOffsetUTC struct {
	// OffsetSeconds is added to UTC, at most ±10 years.
	// +optional
	// +kubebuilder:validation:Minimum=-315576000
	// +kubebuilder:validation:Maximum=315576000
	OffsetSeconds *int `json:"offsetSeconds,omitempty"`
}

// ClockOffsetTimezone is a tz database zone name such as "America/New_York".
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
type ClockOffsetTimezone string

// Timer are the guest's timers.
type Timer struct {
	// HPET is the High Precision Event Timer.
	// +optional
	HPET *HPETTimer `json:"hpet,omitempty"`
	// KVM is the paravirtual KVM clock (KVM only).
	// +optional
	KVM *KVMTimer `json:"kvm,omitempty"`
	// PIT is the Programmable Interval Timer.
	// +optional
	PIT *PITTimer `json:"pit,omitempty"`
	// RTC is the Real Time Clock.
	// +optional
	RTC *RTCTimer `json:"rtc,omitempty"`
	// Hyperv is the Hyper-V reference clock (hv-time, KVM only).
	// +optional
	Hyperv *HypervTimer `json:"hyperv,omitempty"`
}

// HPETTickPolicy is what happens to HPET ticks QEMU missed.
//
// +kubebuilder:validation:Enum=delay;catchup;merge;discard
type HPETTickPolicy string

// PITTickPolicy is what happens to PIT ticks QEMU missed.
//
// +kubebuilder:validation:Enum=delay;catchup;discard
type PITTickPolicy string

// RTCTickPolicy is what happens to RTC ticks QEMU missed.
//
// +kubebuilder:validation:Enum=delay;catchup
type RTCTickPolicy string

// RTCTimerTrack is the clock the RTC follows.
//
// +kubebuilder:validation:Enum=guest;wall
type RTCTimerTrack string

// Tick policies and RTC tracks.
const (
	HPETTickPolicyDelay   HPETTickPolicy = "delay"
	HPETTickPolicyCatchup HPETTickPolicy = "catchup"
	HPETTickPolicyMerge   HPETTickPolicy = "merge"
	HPETTickPolicyDiscard HPETTickPolicy = "discard"

	PITTickPolicyDelay   PITTickPolicy = "delay"
	PITTickPolicyCatchup PITTickPolicy = "catchup"
	PITTickPolicyDiscard PITTickPolicy = "discard"

	RTCTickPolicyDelay   RTCTickPolicy = "delay"
	RTCTickPolicyCatchup RTCTickPolicy = "catchup"

	TrackGuest RTCTimerTrack = "guest"
	TrackWall  RTCTimerTrack = "wall"
)

// RTCTimer is the Real Time Clock.
type RTCTimer struct {
	// TickPolicy: delay or catchup (catchup = QEMU's driftfix=slew).
	// +optional
	TickPolicy RTCTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled (present) defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
	// Track is the clock the RTC follows: guest or wall (host).
	// +optional
	Track RTCTimerTrack `json:"track,omitempty"`
}

// HPETTimer is the High Precision Event Timer.
type HPETTimer struct {
	// TickPolicy is accepted for KubeVirt compatibility; QEMU's HPET has
	// no lost-tick policy.
	// +optional
	TickPolicy HPETTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled (present) defaults to true; false removes the HPET.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// PITTimer is the Programmable Interval Timer.
type PITTimer struct {
	// TickPolicy: delay, catchup or discard.
	// +optional
	TickPolicy PITTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled (present) defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// KVMTimer is the paravirtual KVM clock.
type KVMTimer struct {
	// Enabled (present) defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// HypervTimer is the Hyper-V reference time counter.
type HypervTimer struct {
	// Enabled (present) defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}
