package subresources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Request bodies, with KubeVirt's JSON names (kubevirt.io/api core/v1).

// StartOptions is the body of PUT virtualmachines/{name}/start.
type StartOptions struct {
	metav1.TypeMeta `json:",inline"`
	Paused          bool     `json:"paused,omitempty"`
	DryRun          []string `json:"dryRun,omitempty"`
}

// StopOptions is the body of PUT virtualmachines/{name}/stop.
type StopOptions struct {
	metav1.TypeMeta `json:",inline"`
	GracePeriod     *int64   `json:"gracePeriod,omitempty"`
	DryRun          []string `json:"dryRun,omitempty"`
}

// RestartOptions is the body of PUT virtualmachines/{name}/restart.
type RestartOptions struct {
	metav1.TypeMeta    `json:",inline"`
	GracePeriodSeconds *int64   `json:"gracePeriodSeconds,omitempty"`
	DryRun             []string `json:"dryRun,omitempty"`
}

// MigrateOptions is the body of PUT virtualmachines/{name}/migrate.
type MigrateOptions struct {
	metav1.TypeMeta   `json:",inline"`
	DryRun            []string          `json:"dryRun,omitempty"`
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
}

// PauseOptions is the body of PUT virtualmachineinstances/{name}/pause and
// unpause.
type PauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	DryRun          []string `json:"dryRun,omitempty"`
}

// FreezeOptions is the body of PUT virtualmachineinstances/{name}/freeze,
// forwarded to the node agent as JSON (decodeFreeze).
type FreezeOptions struct {
	// UnfreezeTimeout is when the node agent thaws the guest on its own;
	// nil: the node's default, 5 minutes.
	UnfreezeTimeout *metav1.Duration `json:"unfreezeTimeout,omitempty"`
}

// maxBody bounds a request body; KubeVirt's bodies are a few bytes.
const maxBody = 1 << 20

// readBody reads r's body (bounded) and leaves a fresh copy in r.Body, so
// that a proxied request still carries it.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	if len(b) > maxBody {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("request body exceeds %d bytes", maxBody))
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

// setBody replaces r's body with b (none when b is empty), for the agent.
func setBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	if len(b) == 0 {
		r.Body = http.NoBody
	} else {
		r.Header.Set("Content-Type", "application/json")
	}
}

// decodeBody decodes r's JSON or YAML body into v; an empty body leaves v
// as is. A body that does not decode is a 400 naming the problem (the
// decoder names the field and the type it wanted).
func decodeBody(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 1024).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %v", err))
	}
	return nil
}

// isDryRun reports whether dryRun asks for a dry run ("All").
func isDryRun(dryRun []string) bool {
	return len(dryRun) > 0 && dryRun[0] == metav1.DryRunAll
}
