package vmi

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// TargetOptions shape a migration's target launcher pod.
type TargetOptions struct {
	// MigrationUID is the VMIM's UID (label kubevirt.io/migrationJobUID).
	MigrationUID string
	// Name is the pod's name; a fixed name per migration makes the create
	// idempotent.
	Name string
	// Source is the VMI's current launcher pod: its containerDisk and
	// kernelBoot images are pinned to the digests it runs.
	Source *corev1.Pod
	// AddedNodeSelector is the VMIM's spec.addedNodeSelector.
	AddedNodeSelector map[string]string
}

// RenderTargetPod renders the target launcher pod of a migration of vmi:
// the pod RenderPod gives, named and labelled for the migration, its disk
// images pinned to the source pod's digests, kept off the node of any other
// launcher pod of the VMI (required anti-affinity by hostname), with the
// added node selector merged. It is pure.
func RenderTargetPod(vmi *v1.VirtualMachineInstance, cfg PodConfig, modes VolumeModes, o TargetOptions) (*corev1.Pod, error) {
	pod, err := RenderPod(vmi, cfg, modes)
	if err != nil {
		return nil, err
	}
	pod.GenerateName = ""
	pod.Name = o.Name
	pod.Labels[v1.MigrationJobUIDLabel] = o.MigrationUID
	for k, v := range o.AddedNodeSelector {
		if _, set := pod.Spec.NodeSelector[k]; !set {
			pod.Spec.NodeSelector[k] = v
		}
	}
	if o.Source != nil {
		// The source's PVC capacities, as its modes: no PVC lookup.
		if caps, ok := o.Source.Annotations[v1.PVCCapacitiesAnnotation]; ok {
			pod.Annotations[v1.PVCCapacitiesAnnotation] = caps
		}
		if err := pinImages(pod, o.Source); err != nil {
			return nil, fmt.Errorf("target pod of vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
		}
	}
	antiAffinity(pod, string(vmi.UID))
	return pod, nil
}

// antiAffinity adds a required pod anti-affinity to launcher pods of the
// same VMI by kubernetes.io/hostname.
func antiAffinity(pod *corev1.Pod, vmiUID string) {
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.PodAntiAffinity == nil {
		pod.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a := pod.Spec.Affinity.PodAntiAffinity
	a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.CreatedByLabel: vmiUID}},
		TopologyKey:   corev1.LabelHostname,
	})
}

// pinImages replaces the containerDisk and kernelBoot images (containers
// or image volumes) by the
// manifest digests the source pod's containers of the same name run. An
// image the runtime knows by its ID only (imported, never pulled from a
// registry: the status has no repo digest) keeps its reference: its ID is
// not a manifest digest, and no registry could resolve it.
func pinImages(pod, source *corev1.Pod) error {
	ids := map[string]string{}
	for _, cs := range append(append([]corev1.ContainerStatus{}, source.Status.InitContainerStatuses...), source.Status.ContainerStatuses...) {
		ids[cs.Name] = cs.ImageID
	}
	pin := func(c *corev1.Container) error {
		if c.Name != kernelBootContainer && !strings.HasPrefix(c.Name, diskContainerPrefix) {
			return nil
		}
		id, ok := ids[c.Name]
		if !ok || id == "" {
			return fmt.Errorf("source pod %s: no image ID for container %s", source.Name, c.Name)
		}
		if digest := repoDigest(id); digest != "" {
			c.Image = imageRepository(c.Image) + "@" + digest
		}
		return nil
	}
	for i := range pod.Spec.InitContainers {
		if err := pin(&pod.Spec.InitContainers[i]); err != nil {
			return err
		}
	}
	for i := range pod.Spec.Containers {
		if err := pin(&pod.Spec.Containers[i]); err != nil {
			return err
		}
	}
	pinImageVolumes(pod, ids)
	return nil
}

// pinImageVolumes pins a target pod's image volumes (ImageVolumes shape)
// to the digests the source's containers of the same images run. A source
// of the ImageVolumes shape reports no image IDs for its volumes
// (Kubernetes 1.34): the reference stays as the source has it.
func pinImageVolumes(pod *corev1.Pod, sourceIDs map[string]string) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image == nil {
			continue
		}
		container := kernelBootContainer
		if name, ok := strings.CutSuffix(vol.Name, diskImageSuffix); ok {
			container = diskContainerPrefix + name
		} else if vol.Name != kernelBootVolume {
			continue
		}
		if digest := repoDigest(sourceIDs[container]); digest != "" {
			vol.Image.Reference = imageRepository(vol.Image.Reference) + "@" + digest
		}
	}
}

// repoDigest is the manifest digest of a container status imageID
// ("docker.io/library/x@sha256:…", "docker-pullable://x@sha256:…"); "" for
// a bare image ID ("sha256:…" of the image config).
func repoDigest(imageID string) string {
	if _, d, ok := strings.Cut(imageID, "@"); ok {
		return d
	}
	return ""
}

// imageRepository strips the tag or digest from an image reference.
func imageRepository(image string) string {
	if repo, _, ok := strings.Cut(image, "@"); ok {
		return repo
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// ModesOfPod are the PVC volume modes a rendered launcher pod uses (a
// target pod copies the source's, without a PVC lookup).
func ModesOfPod(pod *corev1.Pod) VolumeModes {
	devices := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		for _, d := range c.VolumeDevices {
			devices[d.Name] = true
		}
	}
	modes := VolumeModes{}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		mode := corev1.PersistentVolumeFilesystem
		if devices[vol.Name] {
			mode = corev1.PersistentVolumeBlock
		}
		modes[vol.PersistentVolumeClaim.ClaimName] = mode
	}
	return modes
}

// CurrentPod is the VMI's launcher pod on status.nodeName (the one its
// guest runs in; while migrating a target pod of the same VMI exists on
// another node), or before the VMI has a node its only pod. Pods being
// deleted are taken only if nothing else matches.
func CurrentPod(pods []*corev1.Pod, vmi *v1.VirtualMachineInstance) *corev1.Pod {
	var found *corev1.Pod
	better := func(p *corev1.Pod) bool {
		if found == nil {
			return true
		}
		return found.DeletionTimestamp != nil && p.DeletionTimestamp == nil
	}
	for _, p := range pods {
		if p.Labels[v1.CreatedByLabel] != string(vmi.UID) {
			continue
		}
		node := vmi.Status.NodeName
		if node != "" && p.Spec.NodeName != node {
			continue
		}
		if node == "" && p.Labels[v1.MigrationJobUIDLabel] != "" {
			continue
		}
		if better(p) {
			found = p
		}
	}
	return found
}
