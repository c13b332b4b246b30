package main

import (
	"fmt"

	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// bootVMI is the VMI the single scenario boots: deploy/examples/vm.yaml's
// guest (kernelBoot of the test guest, 128 MiB, masquerade NIC,
// cloud-init), which prints NODEVIRT-GUEST-READY on its console.
const bootVMI = `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: NAME
spec:
  domain:
    memory:
      guest: 128Mi
    firmware:
      kernelBoot:
        kernelArgs: console=ttyS0 quiet panic=-1
        container:
          image: nodevirt.local/guest-kernel:dev
          kernelPath: /boot/vmlinux
          initrdPath: /boot/initrd.img
    devices:
      autoattachGraphicsDevice: false
      disks:
      - name: cloudinit
        disk: {bus: virtio}
      interfaces:
      - name: default
        masquerade: {}
  networks:
  - name: default
    pod: {}
  volumes:
  - name: cloudinit
    cloudInitNoCloud:
      userData: |
        #!/bin/sh
        echo bench
`

// pausedVMI is the density shape: KubeVirt's density tests boot a small
// containerDisk guest; here startStrategy Paused keeps the vCPUs stopped
// so that 100 guests booting under TCG on two cores do not dominate. It
// has a containerDisk (the test guest's bootable disk image), a
// masquerade NIC, 64 MiB of guest memory and a 5m CPU request (instead of
// the default vCPUs ÷ 10), so that 100 pods' requests fit one 2-core,
// 24 GiB node of the test machine. A paused guest cannot answer ACPI, so
// a grace period of 0 keeps the cleanup between scenarios short.
const pausedVMI = `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: NAME
spec:
  startStrategy: Paused
  terminationGracePeriodSeconds: 0
  domain:
    memory:
      guest: 64Mi
    resources:
      requests:
        cpu: 5m
    devices:
      autoattachGraphicsDevice: false
      disks:
      - name: containerdisk
        disk: {bus: virtio}
      interfaces:
      - name: default
        masquerade: {}
  networks:
  - name: default
    pod: {}
  volumes:
  - name: containerdisk
    containerDisk:
      image: nodevirt.local/guest-disk:dev
`

// nowhereVMI is the controller scale shape: a VMI whose nodeSelector no
// node matches, so its launcher pod stays Pending and no node works.
const nowhereVMI = `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: NAME
spec:
  nodeSelector:
    nodevirt.io/bench: nowhere
  domain:
    memory:
      guest: 64Mi
    devices:
      disks:
      - name: containerdisk
        disk: {bus: virtio}
  volumes:
  - name: containerdisk
    containerDisk:
      image: nodevirt.local/guest-disk:dev
`

// newVMI decodes a template and names the VMI.
func newVMI(template, name string) (*v1.VirtualMachineInstance, error) {
	var vmi v1.VirtualMachineInstance
	if err := yaml.UnmarshalStrict([]byte(template), &vmi); err != nil {
		return nil, fmt.Errorf("VMI template: %w", err)
	}
	vmi.Name = name
	vmi.Labels = map[string]string{"nodevirt.io/bench": "true"}
	return &vmi, nil
}
