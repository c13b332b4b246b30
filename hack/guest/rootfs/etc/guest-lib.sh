# Shell functions shared by the guest's scripts (sourced, not executed).
# shellcheck shell=sh

console() { echo "$*" >/dev/console; }

# cmdline_flag NAME: true if the kernel command line has NAME=1.
cmdline_flag() {
	# shellcheck disable=SC2013 # words wanted: the command line is one line
	for w in $(cat /proc/cmdline); do
		[ "$w" = "$1=1" ] && return 0
	done
	return 1
}

# update_index rewrites the page both HTTP servers serve at GET /.
update_index() {
	mkdir -p /www
	echo "nodevirt-guest $(hostname)" >/www/index.html.new
	mv /www/index.html.new /www/index.html
}

# set_hostname NAME sets the hostname and the HTTP page.
set_hostname() {
	[ -n "$1" ] || return 0
	hostname "$1"
	echo "$1" >/etc/hostname
	update_index
}

# wait_for_nic: true once eth0 exists, false at once if there is no virtio
# network device (virtio device id 1); virtio_net probes asynchronously.
wait_for_nic() {
	grep -qsx 0x0001 /sys/bus/virtio/devices/*/device || return 1
	for _ in $(seq 20); do
		[ -e /sys/class/net/eth0 ] && return 0
		sleep 0.1
	done
	return 1
}

# nocloud_mount mounts the block device labelled cidata (or CIDATA) on /cidata.
nocloud_mount() {
	for _ in $(seq 15); do
		dev=$(findfs LABEL=cidata 2>/dev/null || findfs LABEL=CIDATA 2>/dev/null)
		[ -n "$dev" ] && break
		sleep 0.1
	done
	[ -n "$dev" ] || return 1
	mkdir -p /cidata
	mount -o ro "$dev" /cidata 2>/dev/null && return 0
	for fs in iso9660 vfat; do
		mount -o ro -t $fs "$dev" /cidata 2>/dev/null && return 0
	done
	console "NODEVIRT-CIDATA-MOUNT-FAIL $dev"
	return 1
}

# nocloud_hostname applies meta-data local-hostname (YAML "key: value" or JSON).
nocloud_hostname() {
	[ -f /cidata/meta-data ] || return 0
	h=$(grep -o "local-hostname\"\{0,1\}[[:space:]]*:[[:space:]]*[\"']\{0,1\}[A-Za-z0-9.-]*" /cidata/meta-data |
		head -n 1 | sed "s/.*:[[:space:]]*[\"']\{0,1\}//")
	[ -n "$h" ] || return 0
	set_hostname "$h"
	: >/run/hostname-from-cidata
}

# nocloud_userdata runs user-data when it is a script ("#!" first line).
nocloud_userdata() {
	[ -f /cidata/user-data ] || return 0
	[ "$(head -c 2 /cidata/user-data)" = "#!" ] || return 0
	cp /cidata/user-data /run/user-data
	chmod 0755 /run/user-data
	console "NODEVIRT-USERDATA-BEGIN"
	/run/user-data >/dev/console 2>&1 </dev/null
	console "NODEVIRT-USERDATA-END rc=$?"
}
