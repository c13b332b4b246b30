#!/bin/sh
# Runs once after sysinit, in parallel with the agent and acpid: HTTP servers,
# DHCP (in the background), NoCloud hostname, then NoCloud user-data once DHCP
# has reported (so user-data scripts can use the network).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
# shellcheck source=SCRIPTDIR/guest-lib.sh # /etc/guest-lib.sh in the guest
. /etc/guest-lib.sh

update_index
httpd -p 80 -h /www
httpd -p 8080 -h /www

dhcp=""
if wait_for_nic; then
	# -b: return (and keep renewing in the background) after the first lease
	# or after the first failure; the script prints the DHCP marker either way.
	udhcpc -i eth0 -s /etc/udhcpc.script -O mtu -t 10 -T 1 -A 5 -b >/dev/null 2>&1 &
	dhcp=$!
fi

# Storage drivers for a cidata disk on SATA/IDE/SCSI (virtio_blk is loaded early).
while read -r ko; do
	insmod "$ko" 2>/dev/null
done </etc/modules.late

# NoCloud meta-data wins over a DHCP hostname, whichever comes first.
nocloud_mount && nocloud_hostname
[ -n "$dhcp" ] && wait "$dhcp"
nocloud_userdata
