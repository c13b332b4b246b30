#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Tag every image $IMAGE_PREFIX/*:FROM (make images) as :TO in the
# containerd of every running node: a second locally built version of the
# same images, for upgrade tests.
#
#   hack/cluster/tag-images.sh FROM TO
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

(($# == 2)) || die "usage: $0 FROM TO"
from=$1 to=$2
prefix=${IMAGE_PREFIX:-nodevirt.local}
[ -f "$CLUSTER_DIR/config.env" ] || die "no cluster running in $CLUSTER_DIR"
for ((i = 0; i < NODES; i++)); do
	alive "containerd$i" || continue
	n=0
	for ref in $(ctr_node "$i" images ls -q | grep "^$prefix/.*:$from\$"); do
		ctr_node "$i" images tag --force "$ref" "${ref%:"$from"}:$to" >/dev/null
		n=$((n + 1))
	done
	echo "node$i: tagged $n image(s) :$from as :$to"
done
