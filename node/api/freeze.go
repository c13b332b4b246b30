package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Unfreeze timeouts of PUT .../freeze.
const (
	// DefaultUnfreezeTimeout applies when the body names none: KubeVirt's
	// default (virtctl freeze --unfreeze-timeout).
	DefaultUnfreezeTimeout = 5 * time.Minute
	// MaxUnfreezeTimeout bounds a freeze: a guest whose writes block for
	// longer is broken, not snapshotted. A longer timeout is refused (400),
	// not shortened behind the caller's back.
	MaxUnfreezeTimeout = time.Hour
)

// FreezeOptions is the body of PUT .../freeze, as KubeVirt's virt-api
// sends it to virt-handler: {"unfreezeTimeout": "5m0s"}.
type FreezeOptions struct {
	// UnfreezeTimeout is how long the guest may stay frozen: the agent
	// thaws it when it passes, unless a new freeze renewed it or an
	// unfreeze came first. Nil: DefaultUnfreezeTimeout.
	UnfreezeTimeout *metav1.Duration `json:"unfreezeTimeout,omitempty"`
}

// unfreezeTimeout decodes r's optional FreezeOptions body and returns its
// timeout: the default for an absent or empty body or field, a badRequest
// naming unfreezeTimeout for a value that is not positive or above
// MaxUnfreezeTimeout.
func unfreezeTimeout(r *http.Request) (time.Duration, error) {
	if r.Body == nil {
		return DefaultUnfreezeTimeout, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return 0, badRequest(fmt.Sprintf("read body: %v", err))
	}
	if strings.TrimSpace(string(b)) == "" {
		return DefaultUnfreezeTimeout, nil
	}
	var o FreezeOptions
	if err := json.Unmarshal(b, &o); err != nil {
		return 0, badRequest(fmt.Sprintf(`body must be {"unfreezeTimeout": "<duration>"}: unfreezeTimeout: %v`, err))
	}
	if o.UnfreezeTimeout == nil {
		return DefaultUnfreezeTimeout, nil
	}
	switch d := o.UnfreezeTimeout.Duration; {
	case d <= 0:
		return 0, badRequest(fmt.Sprintf("unfreezeTimeout %v: want a positive duration", d))
	case d > MaxUnfreezeTimeout:
		return 0, badRequest(fmt.Sprintf("unfreezeTimeout %v: want at most %v", d, MaxUnfreezeTimeout))
	default:
		return d, nil
	}
}
