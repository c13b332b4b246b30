package subresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/component-base/compatibility"
)

// Options are the aggregated API server's settings and flags: the
// generic server's secure serving, delegated authentication and
// authorization (k8s.io/apiserver), and where the node agents are.
type Options struct {
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions

	// AgentNamespace and AgentSelector find the agent pods.
	AgentNamespace string
	AgentSelector  string
	// AgentPort is the agents' TLS API port.
	AgentPort int
}

// NewOptions returns the defaults: serving on :8443, the agents of
// namespace nodevirt on port 8186. The group's version, healthz and guestfs
// paths skip authorization, as in virt-api (the API server authorized the
// request before proxying it).
func NewOptions() *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		AgentNamespace: DefaultAgentNamespace,
		AgentSelector:  DefaultAgentSelector,
		AgentPort:      DefaultAgentPort,
	}
	o.SecureServing.BindPort = 8443
	o.SecureServing.ServerCert.PairName = "nodevirt-api"
	for _, v := range Versions {
		for _, p := range []string{"version", "healthz", "guestfs"} {
			o.Authorization.AlwaysAllowPaths = append(o.Authorization.AlwaysAllowPaths, "/apis/"+Group+"/"+v+"/"+p)
		}
	}
	return o
}

// AddFlags registers the options' flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.SecureServing.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
	fs.StringVar(&o.AgentNamespace, "agent-namespace", o.AgentNamespace, "namespace of the node agent pods")
	fs.StringVar(&o.AgentSelector, "agent-selector", o.AgentSelector, "label selector of the node agent pods")
	fs.IntVar(&o.AgentPort, "agent-port", o.AgentPort, "node agents' mutual-TLS API port")
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if o.AgentNamespace == "" {
		errs = append(errs, errors.New("--agent-namespace: must not be empty"))
	}
	if o.AgentPort <= 0 || o.AgentPort > 65535 {
		errs = append(errs, fmt.Errorf("--agent-port: %d out of range", o.AgentPort))
	}
	return errors.Join(errs...)
}

// Server is the generic API server with the group's handler mounted.
type Server struct {
	generic *genericapiserver.GenericAPIServer
}

// NewServer builds the generic API server from o (a self-signed serving
// certificate in memory when no --tls-cert-file is given) and mounts h.
func NewServer(o *Options, h http.Handler) (*Server, error) {
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	cfg := newConfig()
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	return newServer(cfg, h)
}

// newConfig is the generic server configuration without serving and
// authentication: metav1 types only (Status, discovery), stream requests
// long-running.
func newConfig() *genericapiserver.Config {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	cfg := genericapiserver.NewConfig(serializer.NewCodecFactory(scheme))
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.34", "", "")
	cfg.LongRunningFunc = longRunning
	return cfg
}

func newServer(cfg *genericapiserver.Config, h http.Handler) (*Server, error) {
	gs, err := cfg.Complete(nil).New("nodevirt-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("generic API server: %w", err)
	}
	mux := gs.Handler.NonGoRestfulMux
	mux.Handle("/apis/"+Group, http.HandlerFunc(groupHandler))
	mux.HandlePrefix("/apis/"+Group+"/", h)
	gs.DiscoveryGroupManager.AddGroup(APIGroup())
	if gs.AggregatedDiscoveryGroupManager != nil {
		versions, err := AggregatedVersions()
		if err != nil {
			return nil, fmt.Errorf("aggregated discovery: %w", err)
		}
		for _, v := range versions {
			gs.AggregatedDiscoveryGroupManager.AddGroupVersion(Group, v)
		}
	}
	return &Server{generic: gs}, nil
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	return s.generic.PrepareRun().RunWithContext(ctx)
}

// longRunning marks stream requests (websocket upgrades: console, VNC,
// port-forward) and watches as long-running, so that no request timeout
// cuts an open session.
func longRunning(r *http.Request, ri *request.RequestInfo) bool {
	return httpstream.IsUpgradeRequest(r) || (ri != nil && ri.Verb == "watch")
}
