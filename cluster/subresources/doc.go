// Package subresources is nodevirt's aggregated API server for the group
// subresources.kubevirt.io: KubeVirt's virt-api paths and bodies, so that
// KubeVirt's own virtctl works against nodevirt unchanged.
//
// It is an http.Handler tree (Handler) mounted on a k8s.io/apiserver
// GenericAPIServer (Run) that does delegated authentication (TokenReview,
// request-header client CA from the extension-apiserver-authentication
// ConfigMap) and delegated authorization (SubjectAccessReview). The
// standard RequestInfo filter derives the authorization attributes from the
// path, so a PUT .../virtualmachineinstances/{name}/pause is checked as verb
// update on virtualmachineinstances/pause, the names KubeVirt's ClusterRoles
// kubevirt.io:{view,edit,admin,migrate} use. Like virt-api, everything below
// the subresource segment is not part of the attributes (vnc/screenshot is
// authorized as vnc, portforward/{port} as portforward).
//
// Routes, under /apis/subresources.kubevirt.io/{v1,v1alpha3}:
//
//	GET  /                                  APIResourceList (discovery)
//	GET  version, healthz                   build info, liveness
//	GET  guestfs                            404: not supported by nodevirt
//	PUT  namespaces/{ns}/expand-vm-spec     the VM in the body, as is
//	namespaces/{ns}/virtualmachines/{name}/...
//	  PUT start, stop, restart, migrate     cluster API writes (lifecycle.go)
//	  GET expand-spec                       the VM, as is (no instancetypes)
//	  GET portforward/{port}[/{proto}]      websocket, to the VM's VMI
//	namespaces/{ns}/virtualmachineinstances/{name}/...
//	  PUT pause, unpause, softreboot, reset, freeze, unfreeze
//	      (freeze forwards its decoded unfreezeTimeout to the node as
//	      JSON; the node agent thaws the guest when it passes)
//	  GET guestosinfo, userlist, filesystemlist, vnc/screenshot
//	  GET console, vnc, portforward/{port}[/{proto}]   websockets
//
// VM routes write to the cluster API only, never to a node. Per run
// strategy they either patch spec.runStrategy (a JSON patch that tests the
// value it read, then replaces it) or append status.stateChangeRequests (a
// JSON patch on the status subresource that tests the list it read, field
// manager nodevirt-api); the cluster VM controller consumes the requests.
// The decision is the pure function planStart/planStop/planRestart:
// VM + VMI + body → patches or a KubeVirt refusal (same status code and
// message as virt-api).
//
// VMI routes refuse what virt-api refuses before reaching the node (a VMI
// that is not running, already paused, ...) and otherwise reverse-proxy the
// request to the node agent of status.nodeName: its pod (AgentLocator) at
// podIP:8186, mutual TLS with ServerName = node name and the client
// certificate Deps.ClientTLS returns at each dial (rotation needs no
// restart), path /v1/namespaces/{ns}/virtualmachineinstances/{name}/X
// (node/api). Websocket upgrades are proxied byte for byte, so the agent's
// pings reach the client and its pongs the agent; stream requests are
// long-running (no request timeout), an idle session lives as long as both
// ends answer pings. Agent error answers ({"error": ...}) are rewritten
// into metav1.Status with the agent's status code.
//
// Errors are metav1.Status objects. Bad bodies are 400 with the decoder's
// message (which names the field); an unknown VM or VMI is 404
// (virtualmachine.kubevirt.io "x" not found).
//
// The package writes no status field but status.stateChangeRequests of VMs
// (appending requests; the VM controller removes them) and, for stop with
// a grace period, spec.terminationGracePeriodSeconds of the VMI. Handlers
// keep no state between requests; any number of replicas may run.
package subresources
