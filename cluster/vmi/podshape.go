package vmi

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	corelisters "k8s.io/client-go/listers/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// PodShape is how a launcher pod reaches its containerDisk and kernelBoot
// images (docs/launcher-pod.md).
type PodShape string

const (
	// ShapeImageVolumes: one container. Each image is a Kubernetes image
	// volume (feature ImageVolume) mounted read-only into the compute
	// container; no init or holder containers.
	ShapeImageVolumes PodShape = "ImageVolumes"
	// ShapeContainers: the shape that works on every cluster. An init
	// container copies the launcher binary, one holder container per
	// containerDisk keeps its image reachable through /proc/<pid>/root,
	// and an init container copies kernel and initrd out of a kernelBoot
	// image.
	ShapeContainers PodShape = "Containers"
)

// ShapeMode is the cluster's choice of pod shape (configuration key
// launcherPodShape).
type ShapeMode string

const (
	// ShapeAuto uses image volumes where the cluster is known to run them:
	// the API server keeps the field (its ImageVolume gate is on) and every
	// node that runs VMs has a runtime that supports them and a kubelet
	// whose gate is on by default (1.35 and later). A kubelet of 1.33 or
	// 1.34 has the gate off unless configured, which the API does not
	// show: such clusters say ShapeMode ImageVolumes.
	ShapeAuto ShapeMode = "Auto"
	// ShapeModeImageVolumes uses image volumes whenever the API server
	// keeps them (the cluster's operator vouches for the kubelets).
	ShapeModeImageVolumes ShapeMode = "ImageVolumes"
	// ShapeModeContainers always uses the fallback shape.
	ShapeModeContainers ShapeMode = "Containers"
)

// ParseShapeMode parses a configured mode; "" is ShapeAuto.
func ParseShapeMode(s string) (ShapeMode, error) {
	switch m := ShapeMode(s); m {
	case "":
		return ShapeAuto, nil
	case ShapeAuto, ShapeModeImageVolumes, ShapeModeContainers:
		return m, nil
	}
	return "", fmt.Errorf("launcher pod shape %q: want %s, %s or %s", s, ShapeAuto, ShapeModeImageVolumes, ShapeModeContainers)
}

// ChooseShape is the pod shape for mode on a cluster whose API server
// keeps image volumes (apiKeeps, ProbeImageVolumes) and whose VM nodes
// are nodes (those labelled schedulable by their agent). It is pure.
func ChooseShape(mode ShapeMode, apiKeeps bool, nodes []*corev1.Node) PodShape {
	if !apiKeeps || mode == ShapeModeContainers {
		return ShapeContainers
	}
	if mode == ShapeModeImageVolumes {
		return ShapeImageVolumes
	}
	if len(nodes) == 0 {
		return ShapeContainers
	}
	for _, n := range nodes {
		if !NodeRunsImageVolumes(n.Status.NodeInfo) {
			return ShapeContainers
		}
	}
	return ShapeImageVolumes
}

// NodeRunsImageVolumes reports whether a node's runtime supports image
// volumes (containerd 2.1+, CRI-O 1.31+) and its kubelet enables them by
// default (1.35+).
func NodeRunsImageVolumes(info corev1.NodeSystemInfo) bool {
	kubelet, err := version.ParseGeneric(info.KubeletVersion)
	if err != nil || !kubelet.AtLeast(version.MajorMinor(1, 35)) {
		return false
	}
	runtime, v, _ := strings.Cut(info.ContainerRuntimeVersion, "://")
	rv, err := version.ParseGeneric(v)
	if err != nil {
		return false
	}
	switch runtime {
	case "containerd":
		return rv.AtLeast(version.MajorMinor(2, 1))
	case "cri-o":
		return rv.AtLeast(version.MajorMinor(1, 31))
	}
	return false
}

// Shapes chooses the shape of each new launcher pod from the configured
// mode, the API server probe and the current VM nodes.
type Shapes struct {
	Mode ShapeMode
	// APIKeeps is ProbeImageVolumes' answer at start-up.
	APIKeeps bool
	Nodes    corelisters.NodeLister
}

// Config returns cfg with the shape for a pod rendered now, in
// cfg.ShapeMode when set (the configuration in force), else s.Mode; a nil
// Shapes keeps cfg.Shape.
func (s *Shapes) Config(cfg PodConfig) PodConfig {
	if s != nil {
		mode := s.Mode
		if cfg.ShapeMode != "" {
			mode = cfg.ShapeMode
		}
		cfg.Shape = s.shape(mode)
	}
	return cfg
}

// Shape is the shape for a pod rendered now in s.Mode.
func (s *Shapes) Shape() PodShape {
	if s == nil {
		return ShapeContainers
	}
	return s.shape(s.Mode)
}

func (s *Shapes) shape(mode ShapeMode) PodShape {
	var nodes []*corev1.Node
	if s.Nodes != nil && mode == ShapeAuto {
		var err error
		nodes, err = s.Nodes.List(labels.SelectorFromSet(labels.Set{v1.SchedulableLabel: "true"}))
		if err != nil {
			return ShapeContainers
		}
	}
	return ChooseShape(mode, s.APIKeeps, nodes)
}
