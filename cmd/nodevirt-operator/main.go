// Command nodevirt-operator installs, upgrades and removes nodevirt's
// components for the KubeVirt resource of its namespace (see
// cluster/operator). It is leader-elected on the Lease nodevirt-operator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/nodevirt/nodevirt/cluster/leader"
	"github.com/nodevirt/nodevirt/cluster/operator"
	"github.com/nodevirt/nodevirt/cmd/internal/profiling"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodevirt-operator:", err)
		os.Exit(1)
	}
}

// config is the operator's command line.
type config struct {
	kubeconfig, namespace, identity, manifests, listen string
	own                                                operator.Images
	profiling                                          bool
	leaseDuration, renewDeadline, retryPeriod          time.Duration
}

func run() error {
	host, _ := os.Hostname()
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "nodevirt"
	}
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	flag.StringVar(&c.namespace, "namespace", ns, "the operator's namespace: its KubeVirt resource, Lease and components (default $POD_NAMESPACE)")
	flag.StringVar(&c.identity, "identity", fmt.Sprintf("%s_%d", host, os.Getpid()), "this replica's leader election identity")
	flag.StringVar(&c.manifests, "manifests", "/manifests", "directory of the components' manifests (<component>.yaml)")
	flag.StringVar(&c.own.Registry, "image-registry", "", "registry of the component images when the KubeVirt resource names none (default: the registry of the operator's own image, read from its pod $POD_NAME)")
	flag.StringVar(&c.own.Tag, "version", "", "the operator's version: the component images' tag when the KubeVirt resource names none (default: its own image's tag)")
	flag.StringVar(&c.listen, "listen", ":8080", "address serving /healthz (empty: off)")
	flag.BoolVar(&c.profiling, "profiling", false, "also serve Go's profiles (pprof) under /debug/pprof/ on --listen")
	qps := flag.Float64("kube-api-qps", 50, "API requests per second (an install applies every component object at once)")
	burst := flag.Int("kube-api-burst", 100, "API request burst")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 15*time.Second, "leader lease duration")
	flag.DurationVar(&c.renewDeadline, "renew-deadline", 10*time.Second, "leader renew deadline")
	flag.DurationVar(&c.retryPeriod, "retry-period", 2*time.Second, "leader election retry period")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	klog.SetSlogLogger(log)
	manifests, err := readManifests(c.manifests)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	leaseClient, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = float32(*qps), *burst
	if c.own.Registry == "" || c.own.Tag == "" {
		if err := ownImages(&c, leaseClient); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	watchdog := leaderelection.NewLeaderHealthzAdaptor(c.renewDeadline)
	if c.listen != "" {
		if err := serve(ctx, c, watchdog, log); err != nil {
			return err
		}
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.namespace, Name: "nodevirt-operator"},
		Client:     leaseClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.identity},
	}
	return leader.Run(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: c.leaseDuration, RenewDeadline: c.renewDeadline, RetryPeriod: c.retryPeriod,
		Name: "nodevirt-operator", WatchDog: watchdog,
	}, log, func(ctx context.Context) error { return operate(ctx, c, rc, manifests, log) })
}

// ownImages fills in the registry and version the flags leave unset from
// the operator's own pod's image.
func ownImages(c *config, kube kubernetes.Interface) error {
	pod := os.Getenv("POD_NAME")
	if pod == "" {
		return errors.New("--image-registry and --version, or $POD_NAME to read them from the operator's own image")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kube.CoreV1().Pods(c.namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("own pod: %w", err)
	}
	img, err := operator.ImagesOf(p.Spec.Containers[0].Image)
	if err != nil {
		return err
	}
	if c.own.Registry == "" {
		c.own.Registry = img.Registry
	}
	if c.own.Tag == "" {
		c.own.Tag = img.Tag
	}
	return nil
}

// readManifests reads <dir>/<component>.yaml of every component.
func readManifests(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, comp := range operator.Components {
		b, err := os.ReadFile(filepath.Join(dir, comp.File()))
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		out[comp.Name] = b
	}
	return out, nil
}

// serve serves /healthz (the leader election watchdog) and, with
// --profiling, pprof, until ctx ends.
func serve(ctx context.Context, c config, watchdog *leaderelection.HealthzAdaptor, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if c.profiling {
		mux.Handle(profiling.Prefix, profiling.Handler())
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}
