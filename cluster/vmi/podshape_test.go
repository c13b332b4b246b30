package vmi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func nodeWith(kubelet, runtime string) *corev1.Node {
	return &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet, ContainerRuntimeVersion: runtime}}}
}

func TestChooseShape(t *testing.T) {
	fit := nodeWith("v1.35.0", "containerd://2.1.4")
	oldRuntime := nodeWith("v1.35.0", "containerd://1.7.27")
	gateOff := nodeWith("v1.34.4", "containerd://2.1.4")
	tests := []struct {
		name     string
		mode     ShapeMode
		apiKeeps bool
		nodes    []*corev1.Node
		want     PodShape
	}{
		{"AutoAllNodesFit", ShapeAuto, true, []*corev1.Node{fit, nodeWith("v1.36.1", "cri-o://1.31.0")}, ShapeImageVolumes},
		{"AutoOneOldRuntime", ShapeAuto, true, []*corev1.Node{fit, oldRuntime}, ShapeContainers},
		{"AutoKubeletGateOffByDefault", ShapeAuto, true, []*corev1.Node{gateOff}, ShapeContainers},
		{"AutoNoNodes", ShapeAuto, true, nil, ShapeContainers},
		{"AutoAPIDropsField", ShapeAuto, false, []*corev1.Node{fit}, ShapeContainers},
		{"ConfiguredImageVolumes", ShapeModeImageVolumes, true, []*corev1.Node{gateOff}, ShapeImageVolumes},
		// Configured, but the API server would drop the volumes: never a
		// pod without its disks.
		{"ConfiguredButAPIDropsField", ShapeModeImageVolumes, false, nil, ShapeContainers},
		{"ConfiguredContainers", ShapeModeContainers, true, []*corev1.Node{fit}, ShapeContainers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChooseShape(tt.mode, tt.apiKeeps, tt.nodes); got != tt.want {
				t.Errorf("ChooseShape() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNodeRunsImageVolumes(t *testing.T) {
	tests := []struct {
		kubelet, runtime string
		want             bool
	}{
		{"v1.35.0", "containerd://2.1.0", true},
		{"v1.35.2-eks-1", "containerd://2.2.0-rc.1", true},
		{"v1.35.0", "containerd://2.0.5", false},
		{"v1.35.0", "cri-o://1.31.2", true},
		{"v1.35.0", "cri-o://1.30.9", false},
		{"v1.35.0", "docker://28.0.0", false},
		{"v1.34.4", "containerd://2.1.4", false},
		{"v2.0.0", "containerd://3.0.0", true},
		{"", "containerd://2.1.4", false},
		{"v1.35.0", "containerd", false},
	}
	for _, tt := range tests {
		info := corev1.NodeSystemInfo{KubeletVersion: tt.kubelet, ContainerRuntimeVersion: tt.runtime}
		if got := NodeRunsImageVolumes(info); got != tt.want {
			t.Errorf("NodeRunsImageVolumes(kubelet %q, runtime %q) = %v, want %v", tt.kubelet, tt.runtime, got, tt.want)
		}
	}
}

func TestParseShapeMode(t *testing.T) {
	for in, want := range map[string]ShapeMode{"": ShapeAuto, "Auto": ShapeAuto, "ImageVolumes": ShapeModeImageVolumes, "Containers": ShapeModeContainers} {
		if got, err := ParseShapeMode(in); err != nil || got != want {
			t.Errorf("ParseShapeMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseShapeMode("imagevolumes"); err == nil {
		t.Error("ParseShapeMode(imagevolumes) accepted a misspelling")
	}
}

func TestShapes_ConfigModeInForce(t *testing.T) {
	s := &Shapes{Mode: ShapeModeContainers, APIKeeps: true}
	if got := s.Config(PodConfig{}).Shape; got != ShapeContainers {
		t.Errorf("no mode in the config: %s, want the Shapes' Containers", got)
	}
	if got := s.Config(PodConfig{ShapeMode: ShapeModeImageVolumes}).Shape; got != ShapeImageVolumes {
		t.Errorf("config in force says ImageVolumes: %s", got)
	}
	s.APIKeeps = false
	if got := s.Config(PodConfig{ShapeMode: ShapeModeImageVolumes}).Shape; got != ShapeContainers {
		t.Errorf("API server drops image volumes: %s, want Containers", got)
	}
}
