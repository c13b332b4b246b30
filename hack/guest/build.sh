#!/usr/bin/env bash
# Build the nodevirt test guest (see README.md) into OUTDIR:
#
#   hack/guest/build.sh OUTDIR
#
# Outputs: vmlinux, bzImage, initrd.img, disk.img, disk.qcow2. Each output is rebuilt only
# when it is missing or older than one of its inputs. Needs no root: the disk is
# a FAT file system filled with mtools and made bootable with syslinux.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Guest kernel: the newest installed Debian kernel unless KVER is given.
kver=${KVER:-$(find /boot -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V | tail -n 1)}
vmlinuz=/boot/vmlinuz-$kver
[ -r "$vmlinuz" ] || { echo "build.sh: no kernel $vmlinuz (install linux-image-amd64)" >&2; exit 1; }

# Modules loaded before the ready marker (boot path) and after it (storage for
# cidata; ext4, a file system qemu-ga can freeze, for the fsfreeze tests).
early_mods="virtio_pci virtio_console virtio_net virtio_blk virtio_balloon virtio_rng button evdev"
late_mods="virtio_scsi ahci ata_piix sd_mod sr_mod isofs vfat nls_cp437 nls_ascii nls_iso8859-1 nls_utf8 ext4"

# stale OUTPUT INPUT...: true when OUTPUT is missing or older than an input.
stale() {
	local target=$1 f
	shift
	[ -e "$target" ] || return 0
	for f in "$@"; do
		[ "$f" -nt "$target" ] && return 0
	done
	return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/nodevirt-guest.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- vmlinux: the uncompressed ELF inside the bzImage, so QEMU boots it through
# its PVH entry note (no BIOS loader, no in-guest XZ decompression).
extract_vmlinux() {
	local off
	off=$(LC_ALL=C grep -obUa "$(printf '\3757zXZ')" "$vmlinuz" | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || { echo "build.sh: $vmlinuz has no XZ payload" >&2; return 1; }
	# --single-stream: stop at the end of the XZ stream (the bzImage has a trailer).
	tail -c +"$((off + 1))" "$vmlinuz" >"$work/payload.xz"
	xz -dc --single-stream "$work/payload.xz" >"$work/vmlinux"
	[ "$(head -c 4 "$work/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
		{ echo "build.sh: payload of $vmlinuz is not an ELF file" >&2; return 1; }
	mv "$work/vmlinux" "$out/vmlinux"
	echo "guest: vmlinux ($kver, $(stat -c %s "$out/vmlinux") bytes)"
}

# --- initrd.img
# copy_modules LIST FILE: copy LIST with dependencies into the rootfs, in load
# order, and append their paths to FILE (skipping ones already listed in SEEN).
copy_modules() {
	local m ko dst
	for m in $1; do
		modprobe -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
	done | while read -r ko; do
		dst=${ko%.xz}
		grep -qxF "$dst" "$root/etc/modules.seen" 2>/dev/null && continue
		echo "$dst" >>"$root/etc/modules.seen"
		mkdir -p "$root$(dirname "$dst")"
		case "$ko" in
		*.xz) xz -dc "$ko" >"$root$dst" ;;
		*) cp "$ko" "$root$dst" ;;
		esac
		echo "$dst" >>"$2"
	done
}

build_initrd() {
	root=$work/root
	cp -a "$here/rootfs" "$root"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,root,var,mnt,www,lib64}
	ln -sfn ../run "$root/var/run"
	cp /bin/busybox "$root/bin/busybox"
	local a
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || [ -e "$root/bin/$a" ] || [ -e "$root/sbin/$a" ] || ln -s busybox "$root/bin/$a"
	done
	: >"$root/etc/modules.early"
	: >"$root/etc/modules.late"
	copy_modules "$early_mods" "$root/etc/modules.early"
	copy_modules "$late_mods" "$root/etc/modules.late"
	rm -f "$root/etc/modules.seen"
	cp /usr/sbin/qemu-ga "$root/usr/sbin/qemu-ga"
	local lib
	for lib in $(ldd /usr/sbin/qemu-ga | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
		[ -f "$lib" ] || continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
	[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
	(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -6n >"$work/initrd.img"
	mv "$work/initrd.img" "$out/initrd.img"
	echo "guest: initrd.img ($(stat -c %s "$out/initrd.img") bytes)"
}

# --- disk.img: FAT "superfloppy" (no partition table) with syslinux in its boot
# sector, holding the bzImage and the initrd; booted by SeaBIOS.
build_disk() {
	local img=$work/disk.img kib
	kib=$((($(stat -c %s "$vmlinuz") + $(stat -c %s "$out/initrd.img")) / 1024 + 4096))
	mkfs.fat -C -n NODEVIRT "$img" "$kib" >/dev/null
	mcopy -i "$img" "$vmlinuz" ::vmlinuz
	mcopy -i "$img" "$out/initrd.img" ::initrd.img
	mcopy -i "$img" "$here/syslinux.cfg" ::syslinux.cfg
	syslinux --install "$img"
	mv "$img" "$out/disk.img"
	echo "guest: disk.img ($(stat -c %s "$out/disk.img") bytes)"
}

build_qcow2() {
	qemu-img convert -f raw -O qcow2 "$out/disk.img" "$work/disk.qcow2"
	mv "$work/disk.qcow2" "$out/disk.qcow2"
	echo "guest: disk.qcow2 ($(stat -c %s "$out/disk.qcow2") bytes)"
}

mapfile -t rootfs_files < <(find "$here/rootfs" -type f)
if stale "$out/vmlinux" "$vmlinuz" "$here/build.sh"; then extract_vmlinux; fi
# bzImage: the installed kernel as is (EFI stub), for OVMF, which boots a
# kernelBoot kernel as an EFI application and cannot use the PVH vmlinux.
if stale "$out/bzImage" "$vmlinuz"; then cp "$vmlinuz" "$out/bzImage"; fi
if stale "$out/initrd.img" "$here/build.sh" "$vmlinuz" /bin/busybox /usr/sbin/qemu-ga "${rootfs_files[@]}"; then build_initrd; fi
if stale "$out/disk.img" "$here/build.sh" "$here/syslinux.cfg" "$vmlinuz" "$out/initrd.img"; then build_disk; fi
if stale "$out/disk.qcow2" "$out/disk.img"; then build_qcow2; fi
