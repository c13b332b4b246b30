# Test guest: a Debian kernel + busybox initramfs VM image for QEMU tests
# (hack/guest/README.md). Owned by the qmp area.

GUEST_OUT := $(OUT)/guest
GUEST_APT := qemu-system-x86 qemu-utils linux-image-amd64 busybox-static \
	qemu-guest-agent cpio kmod xz-utils syslinux syslinux-common mtools \
	dosfstools genisoimage iproute2 ovmf swtpm

.PHONY: guest-deps guest-images guest-clean

guest-deps: ## Install the Debian packages for the test guest and QEMU tests.
	hack/apt-install.sh $(GUEST_APT)

guest-images: guest-deps ## Build the test guest into _output/guest (vmlinux, bzImage, initrd.img, disk.img, disk.qcow2).
	hack/guest/build.sh $(GUEST_OUT)

guest-clean: ## Remove the built test guest.
	rm -rf $(GUEST_OUT)

TEST_PREREQS += guest-images
