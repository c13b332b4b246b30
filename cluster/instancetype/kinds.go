package instancetype

import (
	"strings"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
)

// instancetypeKind resolves spec.instancetype.kind: empty means the cluster
// kind (KubeVirt's default); the lower-case resource names are accepted as
// KubeVirt accepts them. ok is false for anything else.
func instancetypeKind(kind string) (string, bool) {
	switch strings.ToLower(kind) {
	case "", "virtualmachineclusterinstancetype", "virtualmachineclusterinstancetypes":
		return itv1beta1.ClusterInstancetypeKind, true
	case "virtualmachineinstancetype", "virtualmachineinstancetypes":
		return itv1beta1.InstancetypeKind, true
	}
	return "", false
}

// preferenceKind resolves spec.preference.kind likewise.
func preferenceKind(kind string) (string, bool) {
	switch strings.ToLower(kind) {
	case "", "virtualmachineclusterpreference", "virtualmachineclusterpreferences":
		return itv1beta1.ClusterPreferenceKind, true
	case "virtualmachinepreference", "virtualmachinepreferences":
		return itv1beta1.PreferenceKind, true
	}
	return "", false
}
