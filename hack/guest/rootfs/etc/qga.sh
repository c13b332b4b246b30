#!/bin/sh
# Start qemu-ga on the virtio-serial port named org.qemu.guest_agent.0.
# There is no udev, so find the port through sysfs.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
for _ in $(seq 1 50); do
	for p in /sys/class/virtio-ports/*; do
		[ -f "$p/name" ] || continue
		if [ "$(cat "$p/name")" = org.qemu.guest_agent.0 ]; then
			dev=/dev/${p##*/}
			mkdir -p /dev/virtio-ports
			ln -sf "$dev" /dev/virtio-ports/org.qemu.guest_agent.0
			exec /usr/sbin/qemu-ga -m virtio-serial -p "$dev" -t /run -f /run/qemu-ga.pid --fsfreeze-hook=/etc/qemu/fsfreeze-hook
		fi
	done
	sleep 0.1
done
# No agent port: idle instead of letting init respawn us in a loop.
exec sleep 2147483647
