package subresources

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KubeVirt's refusal messages (virt-api's wording, so that scripts and
// users see the same text).
const (
	msgVMNotRunning     = "VM is not running"
	msgVMIRunning       = "VM is already running"
	msgVMINotRunning    = "VMI is not running"
	msgVMINotPaused     = "VMI is not paused"
	msgVMIPaused        = "VMI is paused"
	msgVMIAlreadyPaused = "VMI is already paused"
	msgNoGuestAgent     = "VMI does not have guest agent connected"
	msgUnderway         = "unable to complete request: stop/start already underway"
	msgLivenessPause    = "Pausing VMIs with LivenessProbe is currently not supported"
)

// The group-resources KubeVirt names in its errors (singular, group
// kubevirt.io): `virtualmachine.kubevirt.io "x" not found`.
var (
	grVM  = schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachine"}
	grVMI = schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstance"}
)

func conflictVM(name, msg string) error {
	return apierrors.NewConflict(grVM, name, errors.New(msg))
}

func conflictVMI(name, msg string) error {
	return apierrors.NewConflict(grVMI, name, errors.New(msg))
}

// writeStatus writes err as a metav1.Status: an API status error keeps its
// code, anything else is a 500.
func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	if s.Code == 0 {
		s.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(s.Code), &s)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// statusFromCode builds the API error of an HTTP status code (an agent's
// answer) with msg.
func statusFromCode(code int, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(code),
		Reason:  reasonForCode(code),
		Message: msg,
	}}
}

func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	default:
		return metav1.StatusReasonInternalError
	}
}
