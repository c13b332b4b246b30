#!/usr/bin/env bash
# Fail if the generated files differ from what hack/update-codegen.sh writes.
# Generates into a scratch copy of the tree, so the working tree is untouched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
generated=(cluster/api/v1/zz_generated.deepcopy.go cluster/api/migrations/v1alpha1/zz_generated.deepcopy.go cluster/api/instancetype/v1beta1/zz_generated.deepcopy.go cluster/api/pool/v1alpha1/zz_generated.deepcopy.go cluster/api/snapshot/v1beta1/zz_generated.deepcopy.go cluster/client deploy/crds)

# Copy the sources the generators read, not build output or cluster state.
# Files listed but deleted in the working tree make cp fail: that is fine.
(cd "$root" && git ls-files -co --exclude-standard -z) | (cd "$root" && { xargs -0 cp --parents -t "$scratch" 2>/dev/null || true; })
"$scratch/hack/update-codegen.sh" >/dev/null

status=0
for p in "${generated[@]}"; do
	if ! diff -r -N "$root/$p" "$scratch/$p" >"$scratch/diff" 2>&1; then
		echo "verify-generated: $p is stale; run \`make generate\`:" >&2
		head -40 "$scratch/diff" >&2
		status=1
	fi
done
[ $status = 0 ] && echo "verify-generated: up to date"
exit $status
