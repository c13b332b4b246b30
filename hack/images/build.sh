#!/usr/bin/env bash
# Build nodevirt's container images without docker (make images) and import
# them into the running local cluster's containerd(s).
#
# Images (IMAGE_PREFIX/NAME:IMAGE_TAG, default nodevirt.local/NAME:dev), each
# an OCI archive $NODEVIRT_OUT/images/NAME.tar:
#   pause               sandbox process of the local cluster
#   probe               static test tool (HTTP server/client, API check)
#   <cmd>               every cmd/<cmd> except the clients nodectl and
#                       kubectl-nodevirt: /usr/bin/<cmd>; nodevirt-operator
#                       also carries the component manifests in /manifests
#                       (hack/manifests)
#   csi-hostpath, csi-provisioner, csi-snapshotter, snapshot-controller
#                       the local cluster's CSI storage (hack/csihostpath and
#                       the sidecars of hack/build-csi.sh), when built
#   nodevirt-launcher   QEMU and swtpm with their library closure, firmware (SeaBIOS, OVMF) and keymaps
#                       (self-contained, nothing from the host's /usr), plus
#                       /usr/bin/nodevirt-launcher once cmd/nodevirt-launcher exists
#   guest-kernel        /boot/vmlinux, /boot/bzImage (EFI), /boot/initrd.img
#                       (firmware.kernelBoot.container)
#   guest-disk          /disk/disk.qcow2, uid 107          (containerDisk)
# The guest images need $NODEVIRT_OUT/guest/ (make guest-images).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${NODEVIRT_OUT:-$root/_output}
dir=$out/images
bin=$out/bin
tools=$dir/tools
guest=$out/guest
prefix=${IMAGE_PREFIX:-nodevirt.local}
tag=${IMAGE_TAG:-dev}
mkdir -p "$dir" "$bin" "$tools"

export CGO_ENABLED=0
# go build rewrites its outputs; install only what changed so that unchanged
# inputs keep their mtimes and the image fingerprints stay valid.
scratch=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
install_changed() { # DESTDIR FILE...
	local dst=$1 f
	shift
	for f in "$@"; do
		cmp -s "$f" "$dst/$(basename "$f")" || install -m 0755 "$f" "$dst/"
	done
}
(cd "$root/hack/images" && go build -trimpath -o "$scratch/" ./imagebuild ./pause ./probe)
install_changed "$tools" "$scratch"/*

built=()
image() { # NAME imagebuild-flags... entries...
	local name=$1
	shift
	"$tools/imagebuild" build -ref "$prefix/$name:$tag" -out "$dir/$name.tar" "$@"
	built+=("$name")
}

image pause -entrypoint /pause "$tools/pause=/pause"
image probe -entrypoint /probe "$tools/probe=/probe"

# Binaries of cmd/ that run in the cluster.
cmds=()
for d in "$root"/cmd/*/; do
	name=$(basename "$d")
	case $name in nodectl | kubectl-nodevirt) continue ;; esac # clients, not in the cluster
	compgen -G "$d*.go" >/dev/null || continue
	cmds+=("$name")
done
if ((${#cmds[@]})); then
	mkdir -p "$scratch/cmd"
	(cd "$root" && go build -trimpath -o "$scratch/cmd/" "${cmds[@]/#/./cmd/}")
	install_changed "$bin" "$scratch"/cmd/*
fi
# The operator's component manifests, rendered from deploy/.
manifests=$out/manifests
mkdir -p "$manifests" "$scratch/manifests"
(cd "$root" && go run ./hack/manifests -deploy deploy -out "$scratch/manifests")
for f in "$scratch"/manifests/*.yaml; do
	cmp -s "$f" "$manifests/$(basename "$f")" || install -m 0644 "$f" "$manifests/"
done
for name in "${cmds[@]}"; do
	extra=()
	case $name in
	nodevirt-launcher) continue ;;
	nodevirt-operator) extra=("$manifests=/manifests") ;;
	esac
	image "$name" -entrypoint "/usr/bin/$name" "$bin/$name=/usr/bin/$name" "${extra[@]}"
done

# The launcher: QEMU and everything it needs at run time. Only the TCG accel
# modules are taken from QEMU's module directory (the UI, audio and block
# modules would drag in GTK, ceph and friends).
base=$dir/rootfs/launcher
mkdir -p "$base/etc" "$base/tmp" "$base/var/run"
chmod 1777 "$base/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nqemu:x:107:107:qemu:/:/sbin/nologin\n' >"$scratch/passwd"
printf 'root:x:0:\nkvm:x:36:qemu\nqemu:x:107:\n' >"$scratch/group"
for f in passwd group; do
	cmp -s "$scratch/$f" "$base/etc/$f" || install -m 0644 "$scratch/$f" "$base/etc/$f"
done
qemu_mods=/usr/lib/x86_64-linux-gnu/qemu
flags=(-libs)
files=("$base=/" /usr/bin/qemu-system-x86_64=/usr/bin/qemu-system-x86_64
	/usr/bin/swtpm=/usr/bin/swtpm
	/usr/share/qemu=/usr/share/qemu /usr/share/seabios=/usr/share/seabios)
# OVMF for firmware.bootloader.efi: only the 4 MiB builds the launch spec
# names (node/launchspec/convert/firmware.go).
for f in OVMF_CODE_4M.fd OVMF_VARS_4M.fd OVMF_CODE_4M.secboot.fd OVMF_VARS_4M.ms.fd; do
	files+=("/usr/share/OVMF/$f=/usr/share/OVMF/$f")
done
for m in "$qemu_mods"/accel-*x86_64.so; do
	[ -f "$m" ] && files+=("$m=$m")
done
[ -d /usr/lib/ipxe/qemu ] && files+=(/usr/lib/ipxe/qemu=/usr/lib/ipxe/qemu)
if [[ " ${cmds[*]} " == *" nodevirt-launcher "* ]]; then
	flags+=(-entrypoint /usr/bin/nodevirt-launcher)
	files+=("$bin/nodevirt-launcher=/usr/bin/nodevirt-launcher")
fi
image nodevirt-launcher "${flags[@]}" "${files[@]}"

# The local cluster's CSI storage: the driver (hack/csihostpath) and the
# Kubernetes CSI sidecars hack/build-csi.sh built (make cluster-binaries).
csi=$out/csi/bin
if [ -x "$csi/csi-provisioner" ]; then
	mkdir -p "$scratch/csi"
	(cd "$root" && go build -trimpath -o "$scratch/csi/" ./hack/csihostpath)
	install_changed "$csi" "$scratch/csi/csihostpath"
	image csi-hostpath -entrypoint /usr/bin/csihostpath "$csi/csihostpath=/usr/bin/csihostpath"
	for name in csi-provisioner csi-snapshotter snapshot-controller; do
		image "$name" -entrypoint "/usr/bin/$name" "$csi/$name=/usr/bin/$name"
	done
fi

# Guest images (make guest-images).
if [ -f "$guest/vmlinux" ] && [ -f "$guest/initrd.img" ]; then
	kernel=("$guest/vmlinux=/boot/vmlinux" "$guest/initrd.img=/boot/initrd.img")
	[ -f "$guest/bzImage" ] && kernel+=("$guest/bzImage=/boot/bzImage")
	image guest-kernel "${kernel[@]}"
fi
qcow=$guest/disk.qcow2
if [ ! -f "$qcow" ] && [ -f "$guest/disk.img" ]; then
	qcow=$dir/guest-disk.qcow2
	[ "$qcow" -nt "$guest/disk.img" ] || qemu-img convert -O qcow2 "$guest/disk.img" "$qcow"
fi
if [ -f "$qcow" ]; then
	image guest-disk -owner 107:107 "$qcow=/disk/disk.qcow2"
fi

# Drop archives of images that no longer exist (e.g. a removed cmd).
for tar in "$dir"/*.tar; do
	[ -f "$tar" ] || continue
	name=$(basename "$tar" .tar)
	[[ " ${built[*]} " == *" $name "* ]] && continue
	rm -f "$tar" "$tar".{digest,ref,stamp}
	echo "removed stale image archive $name"
done
"$root/hack/cluster/import-images.sh"
