#!/bin/sh
# sysinit: mount, load modules, announce readiness. Keep this fast: the ready
# marker is the boot-time measurement point of every test.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
hostname -F /etc/hostname
ip link set lo up
while read -r ko; do
	insmod "$ko" 2>/dev/null
done </etc/modules.early
echo "NODEVIRT-GUEST-READY uptime=$(cut -d' ' -f1 /proc/uptime)" >/dev/console
exit 0
