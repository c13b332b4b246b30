package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// DeploymentState is a Deployment's Workload at version tag.
func DeploymentState(d *appsv1.Deployment, tag string) Workload {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return Workload{
		Kind: "Deployment", Name: d.Name, Found: true,
		Updated: d.Annotations[VersionAnnotation] == tag && s.ObservedGeneration >= d.Generation &&
			s.UpdatedReplicas == want && s.Replicas == want,
		Available: s.AvailableReplicas >= want && s.UnavailableReplicas == 0,
		Status:    fmt.Sprintf("%d/%d updated, %d available", s.UpdatedReplicas, want, s.AvailableReplicas),
	}
}

// DaemonSetState is a DaemonSet's Workload at version tag. A DaemonSet
// that wants no pod (no node matches it) is available.
func DaemonSetState(ds *appsv1.DaemonSet, tag string) Workload {
	s := ds.Status
	return Workload{
		Kind: "DaemonSet", Name: ds.Name, Found: true,
		Updated: ds.Annotations[VersionAnnotation] == tag && s.ObservedGeneration >= ds.Generation &&
			s.UpdatedNumberScheduled == s.DesiredNumberScheduled,
		Available: s.NumberAvailable == s.DesiredNumberScheduled && s.NumberUnavailable == 0,
		Status: fmt.Sprintf("%d/%d nodes updated, %d available", s.UpdatedNumberScheduled, s.DesiredNumberScheduled,
			s.NumberAvailable),
	}
}
