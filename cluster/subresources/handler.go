package subresources

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"k8s.io/client-go/kubernetes"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
)

// Group is the API group served; Versions its versions, preferred first.
const Group = "subresources.kubevirt.io"

// Versions are the served versions of Group, preferred first. Both serve
// the same routes (virtctl uses the preferred one).
var Versions = []string{"v1", "v1alpha3"}

// DefaultAgentPort is the node agent's mutual-TLS API port.
const DefaultAgentPort = 8186

// Config is the static configuration of a Handler.
type Config struct {
	// AgentPort is the port of the node agents' TLS API on their pod IP.
	AgentPort int
	// Version is what GET version answers.
	Version VersionInfo
}

// Validate checks cfg.
func (c Config) Validate() error {
	if c.AgentPort <= 0 || c.AgentPort > 65535 {
		return fmt.Errorf("subresources: AgentPort %d out of range", c.AgentPort)
	}
	return nil
}

// AgentLocator finds the node agent of a node.
type AgentLocator interface {
	// AgentIP returns the pod IP of the ready agent of node, or an error
	// wrapping ErrNoAgent.
	AgentIP(node string) (string, error)
}

// ErrNoAgent is returned by an AgentLocator when a node has no ready agent.
var ErrNoAgent = errors.New("no ready node agent")

// ClientTLS returns the TLS configuration for dialing the agent of node:
// the client certificate (CN nodevirt-api; GetClientCertificate or
// Certificates) and the verification of the agent's serving certificate
// for that node's name. It is called at every dial, so a rotated
// certificate or bundle is used from the next connection on
// (node/api.ClientTLS over a certrotation.Rotator is the production one).
type ClientTLS func(node string) (*tls.Config, error)

// Deps are the Handler's collaborators.
type Deps struct {
	// KubeVirt reads VMs and VMIs, patches them and creates migrations.
	KubeVirt versioned.Interface
	// Kube lists and deletes launcher pods (forced restart).
	Kube kubernetes.Interface
	// Agents locates node agents.
	Agents AgentLocator
	// ClientTLS is the client side of the agents' mutual TLS.
	ClientTLS ClientTLS
	// Log defaults to silence.
	Log *slog.Logger
}

// Handler serves the routes of Group (see the package doc). Create it
// with New.
type Handler struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	mux   *http.ServeMux
	proxy *agentProxy
}

// New validates cfg and deps and returns the handler tree.
func New(cfg Config, deps Deps) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.KubeVirt == nil || deps.Kube == nil || deps.Agents == nil || deps.ClientTLS == nil {
		return nil, errors.New("subresources: KubeVirt, Kube, Agents and ClientTLS are required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, deps: deps, log: deps.Log, mux: http.NewServeMux()}
	h.proxy = newAgentProxy(deps.Agents, deps.ClientTLS, cfg.AgentPort, deps.Log)
	for _, v := range Versions {
		h.routes("/apis/" + Group + "/" + v)
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, statusFromCode(http.StatusNotFound, "the server could not find the requested resource"))
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// routes registers every route under base (/apis/{group}/{version}).
func (h *Handler) routes(base string) {
	m := h.mux
	m.HandleFunc("GET "+base, h.resourceList(base))
	m.HandleFunc("GET "+base+"/{$}", h.resourceList(base))
	m.HandleFunc("GET "+base+"/version", h.version)
	m.HandleFunc("GET "+base+"/healthz", h.healthz)
	m.HandleFunc("GET "+base+"/guestfs", h.guestfs)
	m.HandleFunc("PUT "+base+"/namespaces/{ns}/expand-vm-spec", h.expandVMSpec)

	vm := base + "/namespaces/{ns}/virtualmachines/{name}/"
	m.HandleFunc("PUT "+vm+"start", h.vmStart)
	m.HandleFunc("PUT "+vm+"stop", h.vmStop)
	m.HandleFunc("PUT "+vm+"restart", h.vmRestart)
	m.HandleFunc("PUT "+vm+"migrate", h.vmMigrate)
	m.HandleFunc("GET "+vm+"expand-spec", h.vmExpandSpec)
	m.HandleFunc("GET "+vm+"portforward/{port}", h.vmPortForward)
	m.HandleFunc("GET "+vm+"portforward/{port}/{proto}", h.vmPortForward)

	vmi := base + "/namespaces/{ns}/virtualmachineinstances/{name}/"
	for _, a := range vmiActions {
		m.HandleFunc(a.method+" "+vmi+a.path, h.vmiAction(a))
	}
}
