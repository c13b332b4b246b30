package controller

import (
	"context"
	"errors"
	"fmt"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/leader"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// Deps are the controller process's collaborators.
type Deps struct {
	// Lease renews the leader lease. Give it its own client (own rate
	// limiter): renewals must never queue behind the controllers' writes.
	Lease    coordinationv1client.LeasesGetter
	Kube     kubernetes.Interface
	Kubevirt versioned.Interface
	// CSISnapshots is the CSI snapshot API's client (VolumeSnapshots of
	// VM snapshots); nil leaves VM snapshots without volume snapshots.
	CSISnapshots snapclientset.Interface
	Log          *slog.Logger
	Registry     *prometheus.Registry
	// Debug, when set, is served under /debug/ on ListenAddr (the
	// --profiling flag's pprof handler).
	Debug http.Handler
}

// Run serves /healthz and /metrics, campaigns for the lease and, while
// leading, runs the controllers. It returns nil when ctx is cancelled and
// an error when leadership is lost or the server fails.
func Run(ctx context.Context, cfg Config, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("controller config: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.LeaseName},
		Client:     d.Lease,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(cfg.RenewDeadline)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var srvErr error
	var wg sync.WaitGroup
	if cfg.ListenAddr != "" {
		ln, err := net.Listen("tcp", cfg.ListenAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.ListenAddr, err)
		}
		srv := &http.Server{Handler: mux(watchdog, d.Registry, d.Debug), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				srvErr = fmt.Errorf("http server: %w", err)
				cancel()
			}
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
			defer stop()
			_ = srv.Shutdown(shutdownCtx)
		}()
		d.Log.Info("serving health and metrics", "addr", ln.Addr().String())
	}

	err := leader.Run(ctx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		Name:          cfg.LeaseName,
		WatchDog:      watchdog,
	}, d.Log, func(ctx context.Context) error { return lead(ctx, cfg, d) })
	cancel()
	wg.Wait()
	if srvErr != nil {
		return srvErr
	}
	return err
}

func mux(watchdog *leaderelection.HealthzAdaptor, reg *prometheus.Registry, debug http.Handler) *http.ServeMux {
	m := http.NewServeMux()
	if debug != nil {
		m.Handle("/debug/", debug)
	}
	m.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	m.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return m
}

// lead builds informers and controllers and runs them until ctx ends.
func lead(ctx context.Context, cfg Config, d Deps) error {
	flags := cfg
	cfg, err := cfg.Read(ctx, d.Kube, d.Kubevirt)
	if err != nil {
		return fmt.Errorf("controller config from the ConfigMap and the KubeVirt resource: %w", err)
	}
	d.Log.Info("configuration", "launcherImage", cfg.LauncherImage, "emulation", cfg.Emulation,
		"cpuAllocationRatio", cfg.CPUAllocationRatio, "featureGates", cfg.FeatureGates,
		"heartbeatThreshold", cfg.HeartbeatThreshold, "caDir", cfg.CADir, "certLifetime", cfg.CertLifetime)
	var ca *certsigner.CA
	if cfg.CADir != "" {
		if ca, err = certsigner.LoadCADir(cfg.CADir); err != nil {
			return fmt.Errorf("node API signer (--ca-dir %s, the mounted Secret %s): %w", cfg.CADir, certsigner.CASecret, err)
		}
		d.Log.Info("signing node API certificates", "ca", ca.Certificate().Subject.CommonName, "caNotAfter", ca.Certificate().NotAfter)
	}
	// Without an answer the fallback shape, which works everywhere, is used.
	imageVolumes, err := vmi.ProbeImageVolumes(ctx, d.Kube.CoreV1(), cfg.Namespace, cfg.LauncherImage)
	if err != nil {
		d.Log.Warn("launcher pods get the Containers shape", "err", err)
	}
	d.Log.Info("launcher pod shape", "mode", cfg.PodShape, "apiServerKeepsImageVolumes", imageVolumes)
	s, err := build(cfg, flags, d, ca, imageVolumes)
	if err != nil {
		return err
	}
	return s.run(ctx, cfg.Workers)
}
