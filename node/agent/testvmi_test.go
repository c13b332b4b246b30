package agent_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// The harness's test objects: the VMI a test asks for (vmOpts), the
// launcher pod the harness creates for it, and the VMI's move to
// Scheduled.

// vmOpts shape a test VMI.
type vmOpts struct {
	binding    string // "", "masquerade" or "bridge"
	userData   string
	ignoreACPI bool
	grace      int64
	graphics   bool   // VGA + VNC
	paused     bool   // startStrategy Paused
	balloon    bool   // a virtio-balloon device
	scratch    string // capacity of an emptyDisk "scratch" (virtio, after cloudinit); "" = none
	// unscheduled: as the controller leaves a VMI before Scheduled: phase
	// Scheduling, no node label, no finalizer (prelaunch).
	unscheduled bool
}

// testVMI is the VMI of vmOpts o, labelled for testNode.
func testVMI(ns, name string, o vmOpts) *v1.VirtualMachineInstance {
	mem := resource.MustParse("128Mi")
	args := "console=ttyS0 quiet panic=-1"
	if o.ignoreACPI {
		args += " nodevirt.ignore_acpi=1"
	}
	off, gfx, balloon := false, o.graphics, o.balloon
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:     map[string]string{v1.NodeNameLabel: testNode},
			Finalizers: []string{v1.VirtualMachineInstanceFinalizer},
		},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Memory: &v1.Memory{Guest: &mem},
				Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
					KernelArgs: args,
					Container:  &v1.KernelBootContainer{Image: "guest:test", KernelPath: "/vmlinux", InitrdPath: "/initrd.img"},
				}},
				Devices: v1.Devices{AutoattachGraphicsDevice: &gfx, AutoattachMemBalloon: &balloon},
			},
		},
	}
	if o.unscheduled {
		vmi.Labels, vmi.Finalizers = nil, nil
	}
	if o.grace > 0 {
		vmi.Spec.TerminationGracePeriodSeconds = &o.grace
	}
	if o.paused {
		s := v1.StartStrategyPaused
		vmi.Spec.StartStrategy = &s
	}
	switch o.binding {
	case "":
		vmi.Spec.Domain.Devices.AutoattachPodInterface = &off
	case "masquerade":
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Masquerade: &v1.InterfaceMasquerade{}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", Pod: &v1.PodNetwork{}}}
	case "bridge":
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Bridge: &v1.InterfaceBridge{}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", Pod: &v1.PodNetwork{}}}
	}
	if o.userData != "" {
		vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "cloudinit", Disk: &v1.DiskTarget{Bus: "virtio"}}}
		vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit",
			CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: o.userData},
		}}
	}
	if o.scratch != "" {
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "scratch", Disk: &v1.DiskTarget{Bus: "virtio"}})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "scratch",
			EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse(o.scratch)}})
	}
	return vmi
}

func testPod(vmi *v1.VirtualMachineInstance) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "virt-launcher-" + vmi.Name + "-",
			Labels:       map[string]string{v1.AppLabel: v1.LauncherAppValue, v1.CreatedByLabel: string(vmi.UID)},
			Annotations:  map[string]string{v1.DomainAnnotation: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(vmi, v1.SchemeGroupVersion.WithKind("VirtualMachineInstance")),
			},
		},
		Spec: corev1.PodSpec{
			NodeName:      testNode,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "compute", Image: "nodevirt/nodevirt-launcher:test"}},
		},
	}
}

// schedule moves the VMI to Scheduled, as the controller does once its
// pod runs.
func (v *vm) schedule(t *testing.T) {
	t.Helper()
	if err := v.setScheduled(); err != nil {
		t.Fatal(err)
	}
}

// setScheduled is schedule for any goroutine. An unscheduled VMI gets the
// node label and the finalizer first, as the controller adds them with
// Scheduled.
func (v *vm) setScheduled() error {
	vmi := v.vmi.DeepCopy()
	if vmi.Labels[v1.NodeNameLabel] != testNode {
		vmi.Labels = map[string]string{v1.NodeNameLabel: testNode}
		vmi.Finalizers = []string{v1.VirtualMachineInstanceFinalizer}
		up, err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).Update(v.h.ctx, vmi, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("VMI %s: node label: %w", v.name, err)
		}
		vmi = up
	}
	vmi.Status = v1.VirtualMachineInstanceStatus{
		Phase:    v1.Scheduled,
		NodeName: testNode,
		PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{
			{Phase: v1.Scheduled, PhaseTransitionTimestamp: metav1.Now()},
		},
	}
	up, err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).UpdateStatus(v.h.ctx, vmi, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("VMI %s to Scheduled: %w", v.name, err)
	}
	v.vmi, v.created = up, time.Now()
	return nil
}
