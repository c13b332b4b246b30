#!/usr/bin/env bash
# make demo: deploy nodevirt onto the running local cluster (make cluster-up
# ran first), start deploy/examples/vm.yaml, wait for the guest and show it.
#
#   TIMEOUT=s   how long to wait for the VM (default 180)
set -euo pipefail
# shellcheck source=cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"

TIMEOUT=${TIMEOUT:-180}
VM=demo
NS=default

RESTART=1 "$REPO_ROOT/hack/deploy-local.sh"

log "applying deploy/examples/vm.yaml"
kubectl apply -n "$NS" -f "$REPO_ROOT/deploy/examples/vm.yaml" >/dev/null

vmi_running() {
	kubectl get vmi -n "$NS" "$VM" -o jsonpath='{.status.phase}/{.status.interfaces[0].ipAddress}' | grep -Eq '^Running/.'
}
wait_for "$TIMEOUT" "VMI $VM Running" vmi_running

uid=$(kubectl get vmi -n "$NS" "$VM" -o jsonpath='{.metadata.uid}')
node=$(kubectl get vmi -n "$NS" "$VM" -o jsonpath='{.status.nodeName}')
pod_uid=$(kubectl get pods -n "$NS" -l "kubevirt.io=virt-launcher,kubevirt.io/created-by=$uid" -o jsonpath='{.items[0].metadata.uid}')
serial=$CLUSTER_DIR/nodes/$node/kubelet/pods/$pod_uid/volumes/kubernetes.io~empty-dir/sockets/serial.log

guest_ready() { grep -q '^NODEVIRT-USERDATA-END' "$serial"; }
wait_for "$TIMEOUT" "the guest's console greeting in $serial" guest_ready
dhcp_done() { grep -q '^NODEVIRT-GUEST-GW-' "$serial"; }
wait_for 60 "the guest's network check" dhcp_done || true

echo
kubectl get vm,vmi -n "$NS" -o wide
echo
echo "Guest console (serial log, $serial):"
grep -E '^(NODEVIRT-|hello)' "$serial" | tr -d '\r' | sed 's/^/  /'
echo
ip=$(kubectl get vmi -n "$NS" "$VM" -o jsonpath='{.status.interfaces[0].ipAddress}')
pod_ip=$(kubectl get pods -n "$NS" -l "kubevirt.io/created-by=$uid" -o jsonpath='{.items[0].status.podIP}')
echo "VM IP (guest, masqueraded): $ip; reachable at the pod IP $pod_ip"
cat <<EOT

Next:
  export KUBECONFIG=$KUBECONFIG_ADMIN PATH=$K8S_BIN:\$PATH
  curl http://$pod_ip/          # the guest's web server (declared port 80)
  make virtctl                  # KubeVirt's own virtctl v1.6.0 into _output/bin
  _output/bin/virtctl -n $NS console $VM        # type a command, Ctrl-] quits
  _output/bin/virtctl -n $NS pause vm $VM; _output/bin/virtctl -n $NS unpause vm $VM
  _output/bin/virtctl -n $NS restart $VM; _output/bin/virtctl -n $NS guestosinfo $VM
  kubectl get vmi $VM -o yaml   # conditions, guestOSInfo, interfaces
  kubectl patch vm $VM --type=merge -p '{"spec":{"runStrategy":"Halted"}}'   # ACPI shutdown
  kubectl patch vm $VM --type=merge -p '{"spec":{"runStrategy":"Always"}}'   # a new VMI
  kubectl -n nodevirt logs daemonset/nodevirt-agent       # the node agent
  kubectl apply -f deploy/examples/vm-v1alpha3.yaml       # KubeVirt's older form, containerDisk
  tail -f $serial   # the guest's console
  go run ./cmd/nodectl --socket $CLUSTER_DIR/nodes/$node/nodevirt/agent.sock --db $CLUSTER_DIR/nodes/$node/nodevirt/agent.db list
  # nodectl: list, show/timeline $NS/$VM, qmp $NS/$VM '{"execute":"query-status"}', pause/unpause $NS/$VM
  make demo-down                # stop the local cluster
EOT
