package vmi

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Paths and names of the launcher pod contract (docs/launcher-pod.md).
const (
	ComputeContainer = "compute"
	SocketsVolume    = "sockets"
	PrivateVolume    = "private"
	BinVolume        = "nodevirt-bin"

	SocketsDir = "/var/run/nodevirt/sockets"
	PrivateDir = "/var/run/nodevirt/private"
	BinDir     = "/var/run/nodevirt/bin"
	SecretsDir = "/var/run/nodevirt/secrets"
	PVCsDir    = "/var/run/nodevirt/pvcs"
	// ImagesDir holds the image volumes of the ImageVolumes shape:
	// disks/<volume> per containerDisk, kernel-boot for a kernelBoot image.
	ImagesDir   = "/var/run/nodevirt/images"
	BlockDevDir = "/dev/nodevirt"

	launcherBinary = "nodevirt-launcher"
	// kernelBootContainer copies kernel and initrd out of the kernelBoot image.
	kernelBootContainer = "kernel-boot"
	// diskContainerPrefix + volume name holds a containerDisk image.
	diskContainerPrefix = "volume"
	// diskImageSuffix: volume name + diskImageSuffix is a containerDisk's
	// image volume; kernelBootVolume is the kernelBoot image's.
	diskImageSuffix  = "-image"
	kernelBootVolume = "kernel-boot"
	// LauncherUID is the uid and gid every container of the pod runs as.
	LauncherUID = 107
	// GracePeriodExtra is added to the VMI's grace period for the pod, so
	// the launcher can wait out the guest's grace period after SIGTERM.
	GracePeriodExtra = 15

	// ResourceKVM and ResourceTun are the node agent's device plugin resources.
	ResourceKVM = v1.KVMResource
	ResourceTun = corev1.ResourceName("devices.kubevirt.io/tun")
)

// PodConfig is the cluster configuration that shapes launcher pods.
type PodConfig struct {
	// LauncherImage runs the compute container and the bin init container.
	LauncherImage string
	// LauncherPullPolicy defaults to IfNotPresent.
	LauncherPullPolicy corev1.PullPolicy
	// Emulation runs guests under TCG: no /dev/kvm request, a TCG cache in
	// the overhead.
	Emulation bool
	// AvoidKVMNodes keeps an emulated pod off nodes labelled
	// nodevirt.io/kvm=true (useEmulation auto: TCG only where KVM is
	// missing).
	AvoidKVMNodes bool
	// EmulationMode is the cluster's useEmulation, from which Accelerators
	// sets Emulation and AvoidKVMNodes per pod ("": they are kept).
	EmulationMode EmulationMode
	// ShapeMode is the cluster's launcherPodShape, from which Shapes sets
	// Shape per pod ("": the Shapes' own mode).
	ShapeMode ShapeMode
	// CPUAllocationRatio: a VMI without a CPU request gets 1/ratio of a
	// CPU per vCPU (KubeVirt's developerConfiguration.cpuAllocationRatio;
	// 0 means DefaultCPUAllocationRatio).
	CPUAllocationRatio int
	// Shape is how the pod reaches its images ("" is ShapeContainers).
	Shape PodShape
}

// VolumeModes maps the claim names of a VMI's PVC volumes to their volume
// mode (Filesystem when unset).
type VolumeModes map[string]corev1.PersistentVolumeMode

// RenderPod renders the launcher pod of vmi. It is pure.
func RenderPod(vmi *v1.VirtualMachineInstance, cfg PodConfig, modes VolumeModes) (*corev1.Pod, error) {
	vols, mounts, devices, err := podVolumes(vmi, modes)
	if err != nil {
		return nil, err
	}
	if cfg.LauncherPullPolicy == "" {
		cfg.LauncherPullPolicy = corev1.PullIfNotPresent
	}
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[v1.AppLabel] = v1.LauncherAppValue
	labels[v1.CreatedByLabel] = string(vmi.UID)
	nodeSelector := podNodeSelector(vmi)
	grace := v1.DefaultTerminationGracePeriodSeconds
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	// The pod's own volumes and the compute container's mounts of them
	// come first, then the VMI's volumes.
	own := []corev1.Volume{emptyDir(SocketsVolume), emptyDir(PrivateVolume)}
	ownMounts := []corev1.VolumeMount{{Name: SocketsVolume, MountPath: SocketsDir}, {Name: PrivateVolume, MountPath: PrivateDir}}
	inits, sidecars := initContainers(vmi, cfg), diskContainers(vmi)
	if cfg.Shape == ShapeImageVolumes {
		imgVols, imgMounts := imageVolumes(vmi)
		inits, sidecars = nil, nil
		own, ownMounts = append(own, imgVols...), append(ownMounts, imgMounts...)
	} else {
		own, ownMounts = append(own, emptyDir(BinVolume)), append(ownMounts, binMount())
	}
	compute := computeContainer(vmi, cfg, append(ownMounts, mounts...), devices)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    "virt-launcher-" + vmi.Name + "-",
			Namespace:       vmi.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{v1.DomainAnnotation: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, v1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ShareProcessNamespace:         ptr.To(true),
			TerminationGracePeriodSeconds: ptr.To(grace + GracePeriodExtra),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			NodeSelector:                  nodeSelector,
			Affinity:                      vmi.Spec.Affinity.DeepCopy(),
			Tolerations:                   append([]corev1.Toleration(nil), vmi.Spec.Tolerations...),
			PriorityClassName:             vmi.Spec.PriorityClassName,
			Hostname:                      vmi.Spec.Hostname,
			Subdomain:                     vmi.Spec.Subdomain,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:    ptr.To[int64](LauncherUID),
				RunAsGroup:   ptr.To[int64](LauncherUID),
				FSGroup:      ptr.To[int64](LauncherUID),
				RunAsNonRoot: ptr.To(true),
			},
			InitContainers: inits,
			Containers:     append([]corev1.Container{compute}, sidecars...),
			Volumes:        append(own, vols...),
		},
	}
	if cfg.Emulation && cfg.AvoidKVMNodes {
		avoidKVMNodes(pod)
	}
	return pod, nil
}

// podNodeSelector is the VMI's node selector plus the node facts the pod
// needs: an agent taking VMs, and the static CPU manager for dedicated
// CPUs.
func podNodeSelector(vmi *v1.VirtualMachineInstance) map[string]string {
	sel := map[string]string{}
	for k, v := range vmi.Spec.NodeSelector {
		sel[k] = v
	}
	sel[v1.SchedulableLabel] = "true"
	if dedicatedCPUs(&vmi.Spec) > 0 {
		sel[v1.CPUManagerLabel] = "true"
	}
	return sel
}

func binMount() corev1.VolumeMount { return corev1.VolumeMount{Name: BinVolume, MountPath: BinDir} }

// initContainers: copy the launcher binary into nodevirt-bin, then (with
// kernelBoot) copy kernel and initrd out of the kernelBoot image.
func initContainers(vmi *v1.VirtualMachineInstance, cfg PodConfig) []corev1.Container {
	inits := []corev1.Container{{
		Name:            "nodevirt-bin-init",
		Image:           cfg.LauncherImage,
		ImagePullPolicy: cfg.LauncherPullPolicy,
		Command:         []string{launcherBinary, "install", path.Join(BinDir, launcherBinary)},
		VolumeMounts:    []corev1.VolumeMount{binMount()},
		Resources:       tinyResources(dedicatedCPUs(&vmi.Spec) > 0),
		SecurityContext: containerSecurity(),
	}}
	kb := kernelBoot(vmi)
	if kb == nil {
		return inits
	}
	args := []string{path.Join(BinDir, launcherBinary), "copy", "--to", path.Join(PrivateDir, "kernel")}
	if kb.KernelPath != "" {
		args = append(args, kb.KernelPath+"=kernel")
	}
	if kb.InitrdPath != "" {
		args = append(args, kb.InitrdPath+"=initrd")
	}
	return append(inits, corev1.Container{
		Name:            kernelBootContainer,
		Image:           kb.Image,
		ImagePullPolicy: kb.ImagePullPolicy,
		Command:         args,
		VolumeMounts:    []corev1.VolumeMount{binMount(), {Name: PrivateVolume, MountPath: PrivateDir}},
		Resources:       tinyResources(dedicatedCPUs(&vmi.Spec) > 0),
		SecurityContext: containerSecurity(),
	})
}

// computeContainer runs the launcher, which runs QEMU, with mounts.
func computeContainer(vmi *v1.VirtualMachineInstance, cfg PodConfig, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) corev1.Container {
	return corev1.Container{
		Name:            ComputeContainer,
		Image:           cfg.LauncherImage,
		ImagePullPolicy: cfg.LauncherPullPolicy,
		Command:         []string{launcherBinary, "run", "--sockets", SocketsDir, "--private", PrivateDir},
		Env: []corev1.EnvVar{
			{Name: "NODEVIRT_VMI_NAMESPACE", Value: vmi.Namespace},
			{Name: "NODEVIRT_VMI_NAME", Value: vmi.Name},
			{Name: "NODEVIRT_VMI_UID", Value: string(vmi.UID)},
		},
		Resources:       computeResources(&vmi.Spec, cfg.Emulation, cfg.CPUAllocationRatio),
		VolumeMounts:    mounts,
		VolumeDevices:   devices,
		SecurityContext: containerSecurity(),
	}
}

// diskContainers hold each containerDisk image's filesystem open: the
// launcher reaches the disk through /proc/<holder pid>/root.
func diskContainers(vmi *v1.VirtualMachineInstance) []corev1.Container {
	var out []corev1.Container
	for _, vol := range vmi.Spec.Volumes {
		cd := vol.ContainerDisk
		if cd == nil {
			continue
		}
		out = append(out, corev1.Container{
			Name:            diskContainerPrefix + vol.Name,
			Image:           cd.Image,
			ImagePullPolicy: cd.ImagePullPolicy,
			Command: []string{path.Join(BinDir, launcherBinary), "hold-disk", "--pid-file",
				path.Join(SocketsDir, "disks", vol.Name+".pid")},
			VolumeMounts:    []corev1.VolumeMount{binMount(), {Name: SocketsVolume, MountPath: SocketsDir}},
			Resources:       tinyResources(dedicatedCPUs(&vmi.Spec) > 0),
			SecurityContext: containerSecurity(),
		})
	}
	return out
}

// imageVolumes renders the ImageVolumes shape's image volumes and their
// read-only compute mounts: one per containerDisk, one for a kernelBoot
// image.
func imageVolumes(vmi *v1.VirtualMachineInstance) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(name, mountPath, image string, policy corev1.PullPolicy) {
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: image, PullPolicy: policy},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: mountPath, ReadOnly: true})
	}
	for _, vol := range vmi.Spec.Volumes {
		if cd := vol.ContainerDisk; cd != nil {
			add(vol.Name+diskImageSuffix, path.Join(ImagesDir, "disks", vol.Name), cd.Image, cd.ImagePullPolicy)
		}
	}
	if kb := kernelBoot(vmi); kb != nil {
		add(kernelBootVolume, path.Join(ImagesDir, kernelBootVolume), kb.Image, kb.ImagePullPolicy)
	}
	return vols, mounts
}

// podVolumes renders the secret and PVC volumes and their compute mounts.
func podVolumes(vmi *v1.VirtualMachineInstance, modes VolumeModes) ([]corev1.Volume, []corev1.VolumeMount, []corev1.VolumeDevice, error) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	var devices []corev1.VolumeDevice
	for _, vol := range vmi.Spec.Volumes {
		switch {
		case vol.CloudInitNoCloud != nil:
			v, m := secretVolumes(vol.Name, vol.CloudInitNoCloud)
			vols, mounts = append(vols, v...), append(mounts, m...)
		case vol.PersistentVolumeClaim != nil:
			claim := vol.PersistentVolumeClaim
			mode, ok := modes[claim.ClaimName]
			if !ok {
				return nil, nil, nil, fmt.Errorf("volume %q: %w: %s", vol.Name, ErrPVCNotFound, claim.ClaimName)
			}
			name := vol.Name + "-pvc"
			vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.ClaimName, ReadOnly: claim.ReadOnly},
			}})
			if mode == corev1.PersistentVolumeBlock {
				devices = append(devices, corev1.VolumeDevice{Name: name, DevicePath: path.Join(BlockDevDir, vol.Name)})
			} else {
				mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path.Join(PVCsDir, vol.Name), ReadOnly: claim.ReadOnly})
			}
		}
	}
	return vols, mounts, devices, nil
}

// secretVolumes renders a cloud-init volume's secrets: the user-data
// secret (or, alone, the network-data secret) as <volume>-secret at
// secrets/<volume>; a network-data secret different from the user-data one
// as <volume>-netsecret at secrets/<volume>-networkdata.
func secretVolumes(name string, ci *v1.CloudInitNoCloudSource) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(volName, dir, secret string) {
		vols = append(vols, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secret},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(SecretsDir, dir), ReadOnly: true})
	}
	user, network := ci.SecretRef, ci.NetworkDataSecretRef
	switch {
	case user != nil:
		add(name+"-secret", name, user.Name)
		if network != nil && network.Name != user.Name {
			add(name+"-netsecret", name+"-networkdata", network.Name)
		}
	case network != nil:
		add(name+"-secret", name, network.Name)
	}
	return vols, mounts
}

// DefaultCPUAllocationRatio is KubeVirt's default cpuAllocationRatio: a
// vCPU requests a tenth of a CPU.
const DefaultCPUAllocationRatio = 10

// computeResources: memory request = guest + overhead (no overhead with
// overcommitGuestOverhead), cpu request = vCPUs ÷ cpuRatio unless the VMI
// asks, the VMI's limits (memory limit + overhead), and the device
// resources.
func computeResources(spec *v1.VirtualMachineInstanceSpec, emulation bool, cpuRatio int) corev1.ResourceRequirements {
	if cpuRatio <= 0 {
		cpuRatio = DefaultCPUAllocationRatio
	}
	req := corev1.ResourceList{}
	lim := corev1.ResourceList{}
	for k, v := range spec.Domain.Resources.Requests {
		req[k] = v.DeepCopy()
	}
	for k, v := range spec.Domain.Resources.Limits {
		lim[k] = v.DeepCopy()
	}
	overhead := Overhead(spec, emulation)
	mem := guestMemory(spec)
	if q, ok := req[corev1.ResourceMemory]; ok {
		mem = q
	}
	if !spec.Domain.Resources.OvercommitGuestOverhead {
		mem.Add(*overhead)
	}
	req[corev1.ResourceMemory] = mem
	if q, ok := lim[corev1.ResourceMemory]; ok {
		q.Add(*overhead)
		lim[corev1.ResourceMemory] = q
	}
	if _, ok := req[corev1.ResourceCPU]; !ok {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(vcpus(spec))*1000/int64(cpuRatio), resource.DecimalSI)
	}
	if n := dedicatedCPUs(spec); n > 0 {
		// Guaranteed QoS with whole CPUs: the static CPU manager makes them
		// exclusive to the pod.
		cpus := *resource.NewQuantity(int64(n), resource.DecimalSI)
		req[corev1.ResourceCPU], lim[corev1.ResourceCPU] = cpus, cpus.DeepCopy()
		lim[corev1.ResourceMemory] = req[corev1.ResourceMemory].DeepCopy()
	}
	one := resource.MustParse("1")
	if !emulation {
		req[ResourceKVM], lim[ResourceKVM] = one, one
	}
	if len(nics(spec)) > 0 {
		req[ResourceTun], lim[ResourceTun] = one, one
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// tinyResources are a helper container's; guaranteed sets limits equal to
// the requests, as a Guaranteed pod needs of every container.
func tinyResources(guaranteed bool) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("16Mi"),
	}}
	if guaranteed {
		r.Limits = r.Requests.DeepCopy()
	}
	return r
}

// dedicatedCPUs is how many exclusive CPUs the launcher pod needs: one per
// vCPU, plus one for QEMU's emulator threads with isolateEmulatorThread;
// 0 without dedicatedCpuPlacement.
func dedicatedCPUs(spec *v1.VirtualMachineInstanceSpec) int {
	c := spec.Domain.CPU
	if c == nil || !c.DedicatedCPUPlacement {
		return 0
	}
	n := vcpus(spec)
	if c.IsolateEmulatorThread {
		n++
	}
	return n
}

func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func kernelBoot(vmi *v1.VirtualMachineInstance) *v1.KernelBootContainer {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil {
		return fw.KernelBoot.Container
	}
	return nil
}
