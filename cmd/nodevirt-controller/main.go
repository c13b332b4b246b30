// Command nodevirt-controller is nodevirt's cluster controller: VM → VMI →
// launcher pod, node heartbeats; leader-elected (see cluster/controller).
package main

import (
	"context"
	"flag"
	"fmt"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/controller"
	"github.com/nodevirt/nodevirt/cluster/vmi"
	"github.com/nodevirt/nodevirt/cmd/internal/profiling"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodevirt-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := controller.DefaultConfig()
	host, _ := os.Hostname()
	cfg.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	flag.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "namespace of the lease and the nodevirt-config ConfigMap")
	flag.StringVar(&cfg.LeaseName, "lease-name", cfg.LeaseName, "leader election Lease name")
	flag.StringVar(&cfg.Identity, "identity", cfg.Identity, "this replica's leader election identity")
	flag.DurationVar(&cfg.LeaseDuration, "lease-duration", cfg.LeaseDuration, "leader lease duration")
	flag.DurationVar(&cfg.RenewDeadline, "renew-deadline", cfg.RenewDeadline, "leader renew deadline")
	flag.DurationVar(&cfg.RetryPeriod, "retry-period", cfg.RetryPeriod, "leader election retry period")
	flag.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "address serving /healthz and /metrics (empty: off)")
	profile := flag.Bool("profiling", false, "also serve Go's profiles (pprof) under /debug/pprof/ on --listen")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers per controller")
	flag.StringVar(&cfg.ConfigMapName, "configmap", cfg.ConfigMapName, "ConfigMap overriding launcher image, emulation and heartbeat threshold (empty: none)")
	flag.StringVar(&cfg.LauncherImage, "launcher-image", cfg.LauncherImage, "image of the launcher pods' compute container")
	flag.Var((*emulationFlag)(&cfg.Emulation), "use-emulation", "auto (TCG only where no KVM node fits the VMI), true (TCG everywhere: no devices.kubevirt.io/kvm request) or false (KVM only); bare --use-emulation is true")
	flag.Func("launcher-pod-shape", "launcher pods: Auto (image volumes where the cluster runs them), ImageVolumes or Containers (default Auto)", func(s string) error {
		m, err := vmi.ParseShapeMode(s)
		cfg.PodShape = m
		return err
	})
	flag.DurationVar(&cfg.HeartbeatThreshold, "heartbeat-threshold", cfg.HeartbeatThreshold, "node heartbeat age after which the node is unresponsive")
	flag.DurationVar(&cfg.HeartbeatRecheck, "heartbeat-recheck", cfg.HeartbeatRecheck, "how often a stale node is checked again")
	flag.StringVar(&cfg.CADir, "ca-dir", cfg.CADir, "directory of the mounted nodevirt-ca Secret (ca.crt, ca.key): the leader signs node API certificates with it (empty: no signer)")
	flag.DurationVar(&cfg.CertLifetime, "cert-lifetime", cfg.CertLifetime, "validity of the node API certificates the signer issues (a CSR's shorter expirationSeconds wins)")
	qps := flag.Float64("kube-api-qps", 200, "API requests per second of the controllers (leader election has its own client)")
	burst := flag.Int("kube-api-burst", 400, "API request burst of the controllers")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	klog.SetSlogLogger(log)

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	leaseClient, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = float32(*qps), *burst
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	kv, err := versioned.NewForConfig(rc)
	if err != nil {
		return err
	}
	csi, err := snapclientset.NewForConfig(rc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := controller.Deps{Lease: leaseClient.CoordinationV1(), Kube: kube, Kubevirt: kv, CSISnapshots: csi, Log: log, Registry: reg}
	if *profile {
		d.Debug = profiling.Handler()
	}
	return controller.Run(ctx, cfg, d)
}

// emulationFlag is --use-emulation: a vmi.EmulationMode that also works as
// a bare boolean flag.
type emulationFlag vmi.EmulationMode

func (f *emulationFlag) String() string { return string(*f) }

func (f *emulationFlag) Set(s string) error {
	m, err := vmi.ParseEmulationMode(s)
	if err != nil {
		return err
	}
	*f = emulationFlag(m)
	return nil
}

// IsBoolFlag lets --use-emulation stand alone (meaning true).
func (f *emulationFlag) IsBoolFlag() bool { return true }
