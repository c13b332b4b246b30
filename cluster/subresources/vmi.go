package subresources

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// vmiAction is one VMI route proxied to the node agent.
type vmiAction struct {
	method string
	// path is the route below .../virtualmachineinstances/{name}/, with
	// ServeMux wildcards.
	path string
	// validate refuses, before the node is asked, what virt-api refuses.
	validate func(*v1.VirtualMachineInstance) error
	// decode reads the body (kept for the agent) and reports a dry run.
	decode func(*http.Request) (dryRun bool, err error)
	// failPrefix, when set, prefixes the agent's error for a VMI that is
	// not running (reset: "Failed to reset non-running VMI ...").
	failPrefix func(*v1.VirtualMachineInstance) string
}

// vmiActions are the VMI routes, with virt-api's refusals.
var vmiActions = []vmiAction{
	{method: "PUT", path: "pause", validate: validatePause, decode: decodePause},
	{method: "PUT", path: "unpause", validate: validateUnpause, decode: decodePause},
	{method: "PUT", path: "softreboot", validate: validateSoftReboot},
	{method: "PUT", path: "reset", failPrefix: resetPrefix},
	{method: "PUT", path: "freeze", validate: runningOr(msgVMNotRunning), decode: decodeFreeze},
	{method: "PUT", path: "unfreeze", validate: runningOr(msgVMINotRunning)},
	{method: "GET", path: "guestosinfo", validate: validateGuestAgent},
	{method: "GET", path: "userlist", validate: validateGuestAgent},
	{method: "GET", path: "filesystemlist", validate: validateGuestAgent},
	{method: "GET", path: "console", validate: validateConsole},
	{method: "GET", path: "vnc", validate: validateVNC},
	{method: "GET", path: "vnc/screenshot", validate: validateVNC},
	portForwardAction,
	{method: "GET", path: "portforward/{port}/{proto}", validate: validatePortForward},
}

var portForwardAction = vmiAction{method: "GET", path: "portforward/{port}", validate: validatePortForward}

// vmiAction serves one VMI route: read the VMI, refuse or forward.
func (h *Handler) vmiAction(a vmiAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var dryRun bool
		if a.decode != nil {
			var err error
			if dryRun, err = a.decode(r); err != nil {
				writeStatus(w, err)
				return
			}
		}
		vmi, err := h.getVMI(r.Context(), r.PathValue("ns"), r.PathValue("name"))
		if err != nil {
			writeStatus(w, err)
			return
		}
		if dryRun {
			if a.validate != nil {
				if err := a.validate(vmi); err != nil {
					writeStatus(w, err)
				}
			}
			return
		}
		h.forward(w, r, vmi, a)
	}
}

// forward validates vmi for a and proxies the request to its node agent.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, vmi *v1.VirtualMachineInstance, a vmiAction) {
	if a.validate != nil {
		if err := a.validate(vmi); err != nil {
			writeStatus(w, err)
			return
		}
	}
	sub, err := agentSubpath(r, a)
	if err != nil {
		writeStatus(w, err)
		return
	}
	prefix := ""
	if a.failPrefix != nil {
		prefix = a.failPrefix(vmi)
	}
	h.proxy.serve(w, r, vmi, sub, prefix)
}

// agentSubpath is the node API's name for the route: the same, with the
// port-forward port and protocol checked.
func agentSubpath(r *http.Request, a vmiAction) (string, error) {
	switch a.path {
	case "portforward/{port}", "portforward/{port}/{proto}":
		port, err := strconv.Atoi(r.PathValue("port"))
		if err != nil || port < 1 || port > 65535 {
			return "", apierrors.NewBadRequest(fmt.Sprintf("port: %q is not a port number (1-65535)", r.PathValue("port")))
		}
		sub := "portforward/" + strconv.Itoa(port)
		if p := r.PathValue("proto"); p != "" {
			if p != "tcp" && p != "udp" {
				return "", apierrors.NewBadRequest(fmt.Sprintf("protocol: %q is not tcp or udp", p))
			}
			sub += "/" + p
		}
		return sub, nil
	}
	return a.path, nil
}

func decodePause(r *http.Request) (bool, error) {
	var o PauseOptions
	err := decodeBody(r, &o)
	return isDryRun(o.DryRun), err
}

// decodeFreeze decodes the freeze body (JSON or YAML), refuses a timeout
// that is not positive (virt-api refuses a negative one; the node agent
// refuses zero too, so that a frozen guest is always thawed), and leaves
// the node API's body in r: {"unfreezeTimeout": "<duration>"}, or none
// for the node's default (5 minutes, KubeVirt's).
func decodeFreeze(r *http.Request) (bool, error) {
	var o FreezeOptions
	if err := decodeBody(r, &o); err != nil {
		return false, err
	}
	if o.UnfreezeTimeout == nil {
		setBody(r, nil)
		return false, nil
	}
	if d := o.UnfreezeTimeout.Duration; d <= 0 {
		return false, apierrors.NewBadRequest(fmt.Sprintf("unfreezeTimeout %v: want a positive duration", d))
	}
	b, err := json.Marshal(FreezeOptions{UnfreezeTimeout: o.UnfreezeTimeout})
	if err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("unfreezeTimeout: %v", err))
	}
	setBody(r, b)
	return false, nil
}

func isRunning(vmi *v1.VirtualMachineInstance) bool { return vmi.Status.Phase == v1.Running }

func runningOr(msg string) func(*v1.VirtualMachineInstance) error {
	return func(vmi *v1.VirtualMachineInstance) error {
		if !isRunning(vmi) {
			return conflictVMI(vmi.Name, msg)
		}
		return nil
	}
}

func validatePause(vmi *v1.VirtualMachineInstance) error {
	switch {
	case !isRunning(vmi):
		return conflictVMI(vmi.Name, msgVMNotRunning)
	case vmi.Spec.LivenessProbe != nil:
		//lint:ignore ST1005 virt-api's message, verbatim
		return apierrors.NewForbidden(grVMI, vmi.Name, errors.New(msgLivenessPause))
	case vmi.ConditionTrue(v1.VirtualMachineInstancePaused):
		return conflictVMI(vmi.Name, msgVMIAlreadyPaused)
	}
	return nil
}

func validateUnpause(vmi *v1.VirtualMachineInstance) error {
	switch {
	case !isRunning(vmi):
		return conflictVMI(vmi.Name, msgVMINotRunning)
	case !vmi.ConditionTrue(v1.VirtualMachineInstancePaused):
		return conflictVMI(vmi.Name, msgVMINotPaused)
	}
	return nil
}

// validateSoftReboot refuses a VMI that is not running or paused. Unlike
// virt-api, a VMI without a guest agent is not refused: the agent falls
// back to an ACPI reboot.
func validateSoftReboot(vmi *v1.VirtualMachineInstance) error {
	switch {
	case !isRunning(vmi):
		return conflictVMI(vmi.Name, msgVMNotRunning)
	case vmi.ConditionTrue(v1.VirtualMachineInstancePaused):
		return conflictVMI(vmi.Name, msgVMIPaused)
	}
	return nil
}

func resetPrefix(vmi *v1.VirtualMachineInstance) string {
	if isRunning(vmi) {
		return ""
	}
	return fmt.Sprintf("Failed to reset non-running VMI with phase %s: ", vmi.Status.Phase)
}

func validateGuestAgent(vmi *v1.VirtualMachineInstance) error {
	switch {
	case !isRunning(vmi):
		return conflictVMI(vmi.Name, msgVMINotRunning)
	case !vmi.ConditionTrue(v1.VirtualMachineInstanceAgentConnected):
		return conflictVMI(vmi.Name, msgNoGuestAgent)
	}
	return nil
}

func validateConsole(vmi *v1.VirtualMachineInstance) error {
	switch {
	case isFalse(vmi.Spec.Domain.Devices.AutoattachSerialConsole):
		return apierrors.NewBadRequest("No serial consoles are present.")
	case vmi.Status.Phase == v1.Failed:
		return conflictVMI(vmi.Name, "VMI is in failed status")
	case !isRunning(vmi):
		return apierrors.NewBadRequest(msgVMINotRunning)
	}
	return nil
}

func validateVNC(vmi *v1.VirtualMachineInstance) error {
	switch {
	case isFalse(vmi.Spec.Domain.Devices.AutoattachGraphicsDevice):
		return apierrors.NewBadRequest("No graphics devices are present.")
	case !isRunning(vmi):
		return apierrors.NewBadRequest(msgVMINotRunning)
	}
	return nil
}

// validatePortForward refuses a paused VMI (virt-api's check) and, since
// the tunnel goes through the node agent, one that is not running.
func validatePortForward(vmi *v1.VirtualMachineInstance) error {
	switch {
	case vmi.ConditionTrue(v1.VirtualMachineInstancePaused):
		return conflictVMI(vmi.Name, msgVMIPaused)
	case !isRunning(vmi):
		return apierrors.NewBadRequest(msgVMINotRunning)
	}
	return nil
}

func isFalse(b *bool) bool { return b != nil && !*b }
