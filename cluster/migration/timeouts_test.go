package migration

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestPodTimeouts(t *testing.T) {
	tests := []struct {
		name                  string
		annotations           map[string]string
		wantUnsched, wantPend time.Duration
	}{
		{"defaults", nil, DefaultUnschedulableTimeout, DefaultPendingTimeout},
		{"both set", map[string]string{AnnotationUnschedulableTimeout: "60", AnnotationPendingTimeout: "130"}, time.Minute, 130 * time.Second},
		{"not a number", map[string]string{AnnotationPendingTimeout: "2m"}, DefaultUnschedulableTimeout, DefaultPendingTimeout},
		{"zero and negative", map[string]string{AnnotationUnschedulableTimeout: "0", AnnotationPendingTimeout: "-5"}, DefaultUnschedulableTimeout, DefaultPendingTimeout},
		{"huge", map[string]string{AnnotationPendingTimeout: "99999999999999999999"}, DefaultUnschedulableTimeout, DefaultPendingTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			u, p := podTimeouts(m, Config{})
			if u != tc.wantUnsched || p != tc.wantPend {
				t.Errorf("podTimeouts = %v, %v; want %v, %v", u, p, tc.wantUnsched, tc.wantPend)
			}
		})
	}
}
