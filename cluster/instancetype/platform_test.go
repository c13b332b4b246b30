package instancetype

import (
	"encoding/json"
	"testing"

	"k8s.io/utils/ptr"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// TestConvert_Lossless: every field of the preference's platform types has
// a field of the same JSON spelling in kubevirt.io/v1 (convert drops
// nothing).
func TestConvert_Lossless(t *testing.T) {
	on := &itv1beta1.FeatureState{Enabled: ptr.To(true)}
	for name, tc := range map[string]struct {
		from any
		to   func(any) any
	}{
		"FeatureHyperv": {&itv1beta1.FeatureHyperv{Relaxed: on, VAPIC: on, Spinlocks: &itv1beta1.FeatureSpinlocks{Enabled: ptr.To(true), Retries: ptr.To[uint32](8191)},
			VPIndex: on, Runtime: on, SyNIC: on, SyNICTimer: &itv1beta1.SyNICTimer{Enabled: ptr.To(true), Direct: on}, Reset: on,
			VendorID: &itv1beta1.FeatureVendorID{Enabled: ptr.To(true), VendorID: "nodevirt"}, Frequencies: on, Reenlightenment: on,
			TLBFlush: on, IPI: on, EVMCS: on}, func(f any) any { v := convert[v1.FeatureHyperv](f); return &v }},
		"FeatureAPIC": {&itv1beta1.FeatureAPIC{Enabled: ptr.To(true), EndOfInterrupt: true}, func(f any) any { v := convert[v1.FeatureAPIC](f); return &v }},
		"FeatureKVM":  {&itv1beta1.FeatureKVM{Hidden: true}, func(f any) any { v := convert[v1.FeatureKVM](f); return &v }},
		"ClockOffset": {&itv1beta1.ClockOffset{UTC: &itv1beta1.ClockOffsetUTC{OffsetSeconds: ptr.To(5)}, Timezone: ptr.To("Europe/Berlin")},
			func(f any) any { v := convert[v1.ClockOffset](f); return &v }},
		"Timer": {&itv1beta1.Timer{HPET: &itv1beta1.TickTimer{TickPolicy: "delay", Enabled: ptr.To(true)}, KVM: &itv1beta1.PresentTimer{Enabled: ptr.To(true)},
			PIT: &itv1beta1.TickTimer{TickPolicy: "catchup", Enabled: ptr.To(true)}, RTC: &itv1beta1.RTCTimer{TickPolicy: "catchup", Enabled: ptr.To(true), Track: "guest"},
			Hyperv: &itv1beta1.PresentTimer{Enabled: ptr.To(true)}}, func(f any) any { v := convert[v1.Timer](f); return &v }},
		"EFI": {&itv1beta1.EFI{SecureBoot: ptr.To(true), Persistent: ptr.To(false)}, func(f any) any { v := convert[v1.EFI](f); return &v }},
	} {
		t.Run(name, func(t *testing.T) {
			want, _ := json.Marshal(tc.from)
			got, _ := json.Marshal(tc.to(tc.from))
			if string(got) != string(want) {
				t.Errorf("converted %s\n got %s\nwant %s", name, got, want)
			}
		})
	}
}
