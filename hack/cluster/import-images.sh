#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Import the image archives of $IMAGES_DIR (make images) into the containerd
# of node I, or of every running node when no node is given. An image whose
# tag already points at the same manifest digest is skipped.
#
#   hack/cluster/import-images.sh [I...]
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

import_node() {
	local i=$1 tar ref want have n=0 skipped=0
	for tar in "$IMAGES_DIR"/*.tar; do
		[ -f "$tar" ] || continue
		[ -f "$tar.digest" ] || continue
		want=$(cat "$tar.digest")
		ref=$(cat "$tar.ref" 2>/dev/null || true)
		if [ -n "$ref" ]; then
			have=$(ctr_node "$i" images ls "name==$ref" | awk 'NR == 2 {print $3}')
			if [ "$have" = "$want" ]; then
				skipped=$((skipped + 1))
				continue
			fi
		fi
		ctr_node "$i" images import "$tar" >/dev/null
		n=$((n + 1))
	done
	echo "node$i: imported $n image(s), $skipped already present"
}

if (($# == 0)); then
	[ -f "$CLUSTER_DIR/config.env" ] || exit 0
	for ((i = 0; i < NODES; i++)); do
		alive "containerd$i" && import_node "$i"
	done
	exit 0
fi
for i in "$@"; do import_node "$i"; done
