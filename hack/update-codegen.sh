#!/usr/bin/env bash
# Regenerate everything generated from cluster/api/v1 and the API groups
# cluster/api/{migrations/v1alpha1,instancetype/v1beta1,pool/v1alpha1,snapshot/v1beta1}:
#   cluster/api/v1/zz_generated.deepcopy.go   (deepcopy-gen)
#   cluster/client/{clientset,listers,informers} (client-gen, lister-gen, informer-gen)
#   deploy/crds/                              (controller-gen + hack/tools/crdversions)
# Tools are pinned in hack/tools/go.mod. Run from anywhere; writes into the repo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
module=github.com/nodevirt/nodevirt
api=$module/cluster/api/v1
migrations=$module/cluster/api/migrations/v1alpha1
instancetype=$module/cluster/api/instancetype/v1beta1
pool=$module/cluster/api/pool/v1alpha1
snapshot=$module/cluster/api/snapshot/v1beta1
client=$module/cluster/client
boilerplate=hack/boilerplate.go.txt
tool() { go tool -modfile="$root/hack/tools/go.mod" "$@"; }

rm -f cluster/api/v1/zz_generated.deepcopy.go cluster/api/migrations/v1alpha1/zz_generated.deepcopy.go \
	cluster/api/instancetype/v1beta1/zz_generated.deepcopy.go cluster/api/pool/v1alpha1/zz_generated.deepcopy.go cluster/api/snapshot/v1beta1/zz_generated.deepcopy.go
tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file "$boilerplate" "$api" "$migrations" "$instancetype" "$pool" "$snapshot"

rm -rf cluster/client/clientset cluster/client/listers cluster/client/informers
tool client-gen --go-header-file "$boilerplate" \
	--clientset-name versioned \
	--input-base "$module/cluster" --input api/v1 --input api/migrations/v1alpha1 --input api/instancetype/v1beta1 --input api/pool/v1alpha1 --input api/snapshot/v1beta1 \
	--output-dir cluster/client/clientset --output-pkg "$client/clientset"
tool lister-gen --go-header-file "$boilerplate" \
	--output-dir cluster/client/listers --output-pkg "$client/listers" "$api" "$migrations" "$instancetype" "$pool" "$snapshot"
tool informer-gen --go-header-file "$boilerplate" \
	--versioned-clientset-package "$client/clientset/versioned" \
	--listers-package "$client/listers" \
	--output-dir cluster/client/informers --output-pkg "$client/informers" "$api" "$migrations" "$instancetype" "$pool" "$snapshot"

rm -f deploy/crds/*.yaml
tool controller-gen crd:generateEmbeddedObjectMeta=true paths=./cluster/api/... output:crd:dir=deploy/crds
(cd hack/tools && go run ./crdversions -dir "$root/deploy/crds" -alias v1alpha3)
