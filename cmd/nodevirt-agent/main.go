// Command nodevirt-agent is the node agent: it runs the VMIs scheduled to
// its node (node/agent). Flags and the ConfigMap file make a Config; main
// builds the dependencies and calls Run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/cpupin"
	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/heartbeat"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/node/migration"
	"github.com/nodevirt/nodevirt/node/storeguard"
	"github.com/nodevirt/nodevirt/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodevirt-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		configFile = flag.String("config", "", "agent config file (the ConfigMap's agent.yaml); flags below override it")
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig file; empty = in-cluster config")
		nodeName   = flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
		dbPath     = flag.String("db", "/var/lib/nodevirt/agent.db", "the agent's bbolt file")
		hostRoot   = flag.String("host-root", "/", "the host's root, for the KVM check")
		logLevel   = flag.String("log-level", "info", "debug, info, warn or error")
		// A node agent writes the status of every VM on its node, like the
		// kubelet for pods: client-go's default of 5 requests/s would
		// queue a busy node's status patches behind each other.
		qps   = flag.Float64("kube-api-qps", 50, "API requests per second (the kubelet's default)")
		burst = flag.Int("kube-api-burst", 100, "API request burst (the kubelet's default)")
		af    apiFlags
		mf    metricsFlags
	)
	flag.StringVar(&mf.addr, "metrics-addr", ":8443", "Prometheus /metrics, /healthz and /readyz listen address; empty disables it")
	flag.StringVar(&mf.tlsCert, "metrics-tls-cert", "", "serve /metrics over HTTPS with this certificate (with --metrics-tls-key)")
	flag.StringVar(&mf.tlsKey, "metrics-tls-key", "", "private key of --metrics-tls-cert")
	flag.DurationVar(&mf.timeout, "metrics-timeout", 5*time.Second, "deadline of one scrape's VM statistics; a VM slower than that is skipped")
	flag.BoolVar(&mf.profiling, "profiling", false, "also serve Go's profiles (pprof) under /debug/pprof/ on --metrics-addr")
	flag.StringVar(&af.socket, "api-socket", "/var/lib/nodevirt/agent.sock", "node API unix socket for nodectl (root only); empty disables it")
	flag.StringVar(&af.tlsAddr, "api-tls-addr", "", "node API mutual-TLS listen address, e.g. :8186; empty disables it")
	flag.StringVar(&af.pkiDir, "api-pki-dir", "", "directory keeping the node API serving key and certificate across restarts (default: pki/ next to --db)")
	flag.StringVar(&af.bundle, "api-ca-bundle", "/etc/nodevirt-ca-bundle/ca.crt", "trust bundle of the node API (the mounted ConfigMap nodevirt-ca-bundle), re-read when it changes")
	flag.DurationVar(&af.certLifetime, "api-cert-lifetime", 0, "requested lifetime of the serving certificate (≥ 10m; 0: the signer's default)")
	var mig migrationFlags
	flag.StringVar(&mig.addr, "migration-addr", "", "live-migration channel mutual-TLS listen address, e.g. :8187; empty: no migrations to or from this node")
	flag.StringVar(&mig.advertise, "migration-advertise-addr", "", "the address other agents reach the migration channel at (default: $POD_IP and the --migration-addr port)")
	fc := fileConfig{}
	flag.Func("soft-reboot-timeout", "how long a soft reboot without a guest agent waits for the guest to shut down (default 50s)",
		func(s string) error { fc.SoftRebootTimeout = s; return nil })
	flag.Func("kubelet-root", "kubelet root directory (default /var/lib/kubelet)", func(s string) error { fc.KubeletRoot = s; return nil })
	flag.Func("heartbeat-interval", "how often the node's heartbeat is refreshed (default 30s)", func(s string) error { fc.HeartbeatInterval = s; return nil })
	flag.Func("store-min-free", "free space the store's filesystem keeps; below it the node takes no new VMIs (default 32Mi)",
		func(s string) error { fc.StoreMinFree = s; return nil })
	boolFlag := func(name, usage string, dst **bool) {
		flag.Func(name, usage+" (true/false)", func(s string) error {
			v, err := strconv.ParseBool(s)
			*dst = &v
			return err
		})
	}
	boolFlag("allow-emulation", "run VMs under TCG when KVM is unusable", &fc.AllowEmulation)
	boolFlag("heartbeat", "keep the node's kubevirt.io/heartbeat fresh", &fc.Heartbeat)
	boolFlag("device-plugins", "serve the kvm/tun/vhost-net device plugins", &fc.DevicePlugins)
	flag.Parse()

	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	cfg, svc, err := loadConfig(*configFile, fc)
	if err != nil {
		return err
	}
	cfg.NodeName = *nodeName
	if err := cfg.Validate(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	rc, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = float32(*qps), *burst
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	virt, err := versioned.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubevirt client: %w", err)
	}
	db, err := store.Open(*dbPath, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()

	host := os.DirFS(*hostRoot)
	kvm := convert.DetectKVM(host)
	reg := newRegistry()
	af.node = cfg.NodeName
	if af.pkiDir == "" {
		af.pkiDir = filepath.Join(filepath.Dir(*dbPath), "pki")
	}
	run := map[string]func(context.Context) error{}
	var certs *pki
	if af.tlsAddr != "" || mig.addr != "" {
		if certs, err = newPKI(af, kube.CertificatesV1().CertificateSigningRequests(), log); err != nil {
			return err
		}
		// The rotator returns only when ctx ends.
		run["certificates"] = func(ctx context.Context) error { return ignoreCanceled(certs.rot.Run(ctx)) }
	}
	guard, err := storeguard.New(storeguard.Config{Dir: filepath.Dir(*dbPath), MinFree: svc.StoreMinFree,
		NodeName: cfg.NodeName, Logger: log.With("component", "storeguard")}, kube.CoreV1().Nodes())
	if err != nil {
		return err
	}
	run["store guard"] = guard.Run
	// The effects on the host (launcher, network, QEMU, processes) are
	// left nil: New takes the host's own.
	deps := agent.Deps{Kube: kube, Virt: virt, Store: db, KVM: kvm, Log: log, Registerer: reg, Guard: guard}
	if mig.addr != "" {
		if cfg.MigrationAddress, err = mig.advertised(); err != nil {
			return err
		}
		deps.Migration = agent.MigrationDialer{Dialer: migration.Dialer{Certs: certs.rot, Roots: certs.bundle,
			Log: log.With("component", "migration")}}
	}
	a, err := agent.New(cfg, deps)
	if err != nil {
		return err
	}
	run["agent"] = a.Run
	if mig.addr != "" {
		run["migration channel"] = func(ctx context.Context) error { return serveMigrations(ctx, mig, a, certs, log) }
	}
	if svc.Heartbeat {
		hb, err := heartbeat.New(heartbeat.Config{NodeName: cfg.NodeName, Interval: svc.HeartbeatInterval, Logger: log,
			Labels: nodeFacts(cfg.KubeletRoot, kvm, log), Refusing: guard.Refusing}, kube.CoreV1().Nodes())
		if err != nil {
			return err
		}
		run["heartbeat"] = hb.Run
	}
	if svc.DevicePlugins {
		devs := deviceplugin.HostDevices(host, kvm.Usable)
		dpc := deviceplugin.Config{Dir: svc.DevicePluginDir, Host: host, Logger: log}
		run["device plugins"] = func(ctx context.Context) error { return deviceplugin.Run(ctx, dpc, devs) }
	}
	if af.socket != "" || af.tlsAddr != "" {
		run["node API"] = func(ctx context.Context) error { return serveAPI(ctx, af, a, certs, log) }
	}
	if mf.addr != "" {
		run["metrics"] = func(ctx context.Context) error {
			return serveMetrics(ctx, mf, cfg.NodeName, reg, a.MetricsSource(), a.Ready, log)
		}
	}
	return runAll(ctx, run)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// newLogger returns a JSON slog logger and routes klog (client-go) into it.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	klog.SetSlogLogger(log)
	return log, nil
}

// nodeFacts returns the node labels the heartbeat reports: cpumanager,
// whether the kubelet gives Guaranteed pods exclusive CPUs, and
// nodevirt.io/kvm, whether KVM is usable here (the verdict the agent
// launches QEMU by, found once at start-up).
func nodeFacts(kubeletRoot string, kvm convert.KVM, log *slog.Logger) func() map[string]string {
	return func() map[string]string {
		static, err := cpupin.StaticPolicy(kubeletRoot)
		if err != nil {
			log.Warn("cannot tell the kubelet's CPU manager policy; reporting cpumanager=false", "err", err)
		}
		return map[string]string{
			v1.CPUManagerLabel: strconv.FormatBool(static),
			v1.KVMLabel:        strconv.FormatBool(kvm.Usable),
		}
	}
}
