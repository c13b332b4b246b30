#!/bin/sh
# Runs once after sysinit, in parallel with the agent and acpid:
# HTTP servers, NoCloud (hostname, then user-data after the network), DHCP.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
. /etc/guest-lib.sh

while read -r ko; do
	insmod "$ko" 2>/dev/null
done </etc/modules.late

update_index
httpd -p 80 -h /www
httpd -p 8080 -h /www

nocloud_mount
nocloud_hostname

if wait_for_nic; then
	udhcpc -i eth0 -s /etc/udhcpc.script -O mtu -t 5 -T 2 -A 5 -b >/dev/null 2>&1
	# udhcpc -b returns after the first lease or after giving up once;
	# the script has printed the DHCP marker by then.
fi

nocloud_userdata
