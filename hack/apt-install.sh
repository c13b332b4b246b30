#!/usr/bin/env bash
# Install Debian packages that are missing; a no-op when all are present.
#
#   hack/apt-install.sh qemu-system-x86 qemu-utils ...
#
# Idempotent and safe to run from several make targets at once: apt waits for
# the dpkg lock instead of failing, and uses a private TMPDIR (a shared /tmp
# cleaner once removed apt's scratch files mid-install on this machine kind).
set -euo pipefail
missing=()
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
((${#missing[@]})) || exit 0
if [ "$(id -u)" != 0 ]; then
	echo "apt-install: need root to install: ${missing[*]}" >&2
	exit 1
fi
tmp=$(mktemp -d /var/tmp/nodevirt-apt.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp DEBIAN_FRONTEND=noninteractive
lock=(-o DPkg::Lock::Timeout=900)
echo "apt-install: installing ${missing[*]}" >&2
# A fresh machine has no package lists; refresh them once if a package is unknown.
if ! apt-get "${lock[@]}" install -y --no-install-recommends "${missing[@]}" >"$tmp/log" 2>&1; then
	apt-get "${lock[@]}" update -qq
	apt-get "${lock[@]}" install -y --no-install-recommends "${missing[@]}"
fi
