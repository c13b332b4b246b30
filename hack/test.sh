#!/usr/bin/env bash
# The full test suite (make test): every package, in two lanes that run side
# by side, each a go test of one package at a time (-p 1).
#
#   cluster lane  the packages under e2e/: the suites on the host's one local
#                 cluster (e2e/localcluster), one after another
#   unit lane     every other package: unit and integration tests on real
#                 QEMU, netlink, bbolt, etcd and kube-apiserver, no cluster
#
# One `go test ./...` runs as many packages at a time as the host has CPUs
# (2 here), and a cluster suite waiting for the cluster lock holds one of
# those slots while it waits: the suites filled both slots one after another
# and the packages listed after e2e/ (netsetup, node, qmp, store) ran only
# once the last suite had started. Here the suites never wait (the lock
# stays, for other users of the cluster), the unit lane runs beside them,
# and two test processes run at a time, as before.
#
# The checks (make verify-generated lint) stay before both lanes: run in the
# unit lane they took 14 minutes of it, which pushed the unit lane's QEMU
# tests beside the chaos suite, whose resident guests must never stop
# answering for 5 s (a CI run failed on that), and slowed the suites more
# than it saved.
#
# Environment: GO (default go), GOTEST_FLAGS (default -count=1). Each lane's
# result and duration are printed at the end. The exit status is the
# cluster lane's when it failed, else the unit lane's.
set -euo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
read -r -a flags <<<"${GOTEST_FLAGS:--count=1}"

cluster=()
unit=()
while IFS= read -r pkg; do
	case "$pkg" in
	*/e2e/*) cluster+=("$pkg") ;;
	*) unit+=("$pkg") ;;
	esac
done < <("$go" list ./...)

began=$SECONDS
"$go" test -p 1 "${flags[@]}" "${cluster[@]}" &
cluster_pid=$!
unit_status=0
"$go" test -p 1 "${flags[@]}" "${unit[@]}" || unit_status=$?
unit_took=$((SECONDS - began))
cluster_status=0
wait "$cluster_pid" || cluster_status=$?
cluster_took=$((SECONDS - began))

echo "test lanes: cluster (${#cluster[@]} packages) exit ${cluster_status} after ${cluster_took}s;" \
	"unit (${#unit[@]} packages) exit ${unit_status} after ${unit_took}s"
if [ "$cluster_status" -ne 0 ]; then
	exit "$cluster_status"
fi
exit "$unit_status"
