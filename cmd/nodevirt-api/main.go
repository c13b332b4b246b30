// Command nodevirt-api is nodevirt's aggregated API server for
// subresources.kubevirt.io (see cluster/subresources): leader-less, any
// number of replicas behind the Service the APIServices point at.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/subresources"
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
	var files clientTLSFiles
	fs.StringVar(&files.cert, "agent-client-cert", "", "PEM client certificate (CN nodevirt-api) presented to node agents; re-read when it changes")
	fs.StringVar(&files.key, "agent-client-key", "", "PEM private key of --agent-client-cert")
	fs.StringVar(&files.ca, "agent-ca-bundle", "", "PEM bundle of the CAs that sign the agents' serving certificates; re-read when it changes")
	qps := fs.Float32("kube-api-qps", 100, "API requests per second")
	burst := fs.Int("kube-api-burst", 200, "API request burst")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := files.validate(); err != nil {
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
	h, err := subresources.New(
		subresources.Config{AgentPort: opts.AgentPort, Version: subresources.BuildVersion()},
		subresources.Deps{KubeVirt: kv, Kube: kube, Agents: agents, ClientTLS: files.clientTLS, Log: log},
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
	log.Info("serving", "group", subresources.Group, "port", opts.SecureServing.BindPort)
	return srv.Run(ctx)
}
