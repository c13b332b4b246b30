package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

func TestPodKVM(t *testing.T) {
	usable := convert.KVM{Usable: true}
	absent := convert.KVM{Reason: "/dev/kvm does not exist"}
	pod := func(kvm bool) *corev1.Pod {
		c := corev1.Container{Name: "compute", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{}}}
		if kvm {
			c.Resources.Limits[deviceplugin.ResourceKVM] = resource.MustParse("1")
		}
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	tests := []struct {
		name string
		node convert.KVM
		pod  *corev1.Pod
		want bool
	}{
		{"KVM node, pod given /dev/kvm", usable, pod(true), true},
		{"KVM node, emulation pod", usable, pod(false), false},
		{"no KVM, pod asks anyway", absent, pod(true), false},
		{"no pod", usable, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := podKVM(tc.node, tc.pod)
			if got.Usable != tc.want {
				t.Errorf("usable = %v, want %v (%s)", got.Usable, tc.want, got.Reason)
			}
			if !got.Usable && got.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}
