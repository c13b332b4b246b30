package main

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

func TestLauncherShaped(t *testing.T) {
	for _, shape := range []vmi.PodShape{vmi.ShapeImageVolumes, vmi.ShapeContainers} {
		t.Run(string(shape), func(t *testing.T) {
			burst, err := newVMI(pausedVMI, "b")
			if err != nil {
				t.Fatal(err)
			}
			burst.UID = "uid-1"
			launcher, err := vmi.RenderPod(burst, vmi.PodConfig{LauncherImage: "launcher:dev", Emulation: true, AvoidKVMNodes: true, Shape: shape}, nil)
			if err != nil {
				t.Fatal(err)
			}
			launcher.Name, launcher.Spec.NodeName = "virt-launcher-b-x", "node-a"
			before := launcher.DeepCopy()

			got := launcherShaped(launcher, "node-a")
			if !reflect.DeepEqual(launcher, before) {
				t.Error("launcherShaped changed its argument")
			}
			if want := map[string]string{barePodLabel: "true"}; !reflect.DeepEqual(got.Labels, want) {
				t.Errorf("labels %v, want %v: the controller and the agent must not take it for a launcher", got.Labels, want)
			}
			if got.Name != "" || got.GenerateName != "" || len(got.OwnerReferences) != 0 || len(got.Annotations) != 0 {
				t.Errorf("metadata %+v, want only the label", got.ObjectMeta)
			}
			if got.Spec.NodeName != "" {
				t.Errorf("nodeName %q: the pod must go through the scheduler like the bare pods", got.Spec.NodeName)
			}
			if got.Spec.NodeSelector[corev1.LabelHostname] != "node-a" || got.Spec.NodeSelector[v1.SchedulableLabel] != "true" {
				t.Errorf("nodeSelector %v, want the launcher's plus the node", got.Spec.NodeSelector)
			}
			// Everything the kubelet starts is the launcher pod's.
			if !reflect.DeepEqual(got.Spec.Containers, launcher.Spec.Containers) ||
				!reflect.DeepEqual(got.Spec.InitContainers, launcher.Spec.InitContainers) ||
				!reflect.DeepEqual(got.Spec.Volumes, launcher.Spec.Volumes) ||
				!reflect.DeepEqual(got.Spec.SecurityContext, launcher.Spec.SecurityContext) ||
				!reflect.DeepEqual(got.Spec.Affinity, launcher.Spec.Affinity) {
				t.Error("containers, volumes, security context or affinity differ from the launcher pod's")
			}

			pods := launcherShapedPods(got)
			a, b := pods("shaped-0"), pods("shaped-1")
			if a.Name != "shaped-0" || b.Name != "shaped-1" || got.Name != "" {
				t.Errorf("names %q %q, template %q", a.Name, b.Name, got.Name)
			}
		})
	}
}
