package localcluster

// GuestSpec is a VMI spec that boots the test guest (hack/guest) from the
// guest-kernel image, in YAML flow style so it fits a manifest at any
// indentation.
const GuestSpec = `{terminationGracePeriodSeconds: 5, domain: {memory: {guest: 128Mi}, ` +
	`firmware: {kernelBoot: {kernelArgs: "console=ttyS0 quiet panic=-1", container: {image: nodevirt.local/guest-kernel:dev, ` +
	`kernelPath: /boot/vmlinux, initrdPath: /boot/initrd.img}}}, devices: {autoattachGraphicsDevice: false}}}`
