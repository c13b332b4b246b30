// Command nodevirt-api is nodevirt's aggregated API server for
// subresources.kubevirt.io (see cluster/subresources): leader-less, any
// number of replicas behind the Service the APIServices point at.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/subresources"
	nodeapi "github.com/nodevirt/nodevirt/node/api"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodevirt-api:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := subresources.NewOptions()
	fs := pflag.NewFlagSet("nodevirt-api", pflag.ContinueOnError)
	opts.AddFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for reading and writing VMs (default: in-cluster config)")
	bundlePath := fs.String("agent-ca-bundle", "/etc/nodevirt-ca-bundle/"+certrotation.BundleKey,
		"PEM bundle of the CA that signs the agents' serving certificates (ConfigMap "+certrotation.BundleConfigMap+"); re-read when it changes")
	certLifetime := fs.Duration("agent-client-cert-lifetime", 0, "requested lifetime of the client certificate for node agents (0: the signer's default)")
	qps := fs.Float32("kube-api-qps", 100, "API requests per second")
	burst := fs.Int("kube-api-burst", 200, "API request burst")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	klog.SetSlogLogger(log)

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = *qps, *burst
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	kv, err := versioned.NewForConfig(rc)
	if err != nil {
		return err
	}
	agents, err := subresources.NewPodAgents(kube, opts.AgentNamespace, opts.AgentSelector)
	if err != nil {
		return err
	}
	// The client certificate for node agents (CN nodevirt-api) comes from
	// the controller's signer through the CSR API; its key never leaves
	// this process, and it is renewed while serving.
	bundle := certrotation.NewBundle(*bundlePath, 0)
	rot, err := certrotation.New(certrotation.Config{
		Identity: certrotation.APIClient(),
		Lifetime: *certLifetime,
		Roots:    bundle,
		Log:      log.With("component", "certrotation"),
	}, kube.CertificatesV1().CertificateSigningRequests())
	if err != nil {
		return err
	}
	clientTLS := func(node string) (*tls.Config, error) { return nodeapi.ClientTLS(rot, bundle, node), nil }
	h, err := subresources.New(
		subresources.Config{AgentPort: opts.AgentPort, Version: subresources.BuildVersion()},
		subresources.Deps{KubeVirt: kv, Kube: kube, Agents: agents, ClientTLS: clientTLS, Log: log},
	)
	if err != nil {
		return err
	}
	srv, err := subresources.NewServer(opts, h)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := agents.Start(ctx); err != nil {
		return err
	}
	go func() {
		if err := rot.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("client certificate rotation ended", "err", err)
		}
	}()
	log.Info("serving", "group", subresources.Group, "port", opts.SecureServing.BindPort)
	return srv.Run(ctx)
}
