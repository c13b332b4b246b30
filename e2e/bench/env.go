package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/node/api"
)

// benchNamespace holds every object the benchmark creates.
const benchNamespace = "nodevirt-bench"

// env is the cluster the scenarios run on and the clients they share.
type env struct {
	root    string
	cluster *localcluster.Cluster
	node    localcluster.Node
	kube    kubernetes.Interface
	virt    versioned.Interface
	// csi is the CSI snapshot API's client (the snapshot scenario).
	csi snapclientset.Interface
	log *slog.Logger
	// nodeAPI talks to the node agent's unix socket (public routes);
	// nodectl is the debug routes' client on the same socket.
	nodeAPI *http.Client
	nodectl *api.Client
	// http is for the agent's metrics port (pod IP).
	http *http.Client
	vmis *observer
}

// setUp reuses the running local cluster or starts one, deploys nodevirt
// (restarting it, so freshly imported images run) and creates the
// benchmark namespace, removing what an earlier run left there. stop
// undoes what setUp started.
func setUp(ctx context.Context, log *slog.Logger, keep bool) (e *env, stop func(), err error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(root, ".cluster")
	if marker, err := os.ReadFile("/run/nodevirt-cluster"); err == nil {
		dir = strings.TrimSpace(string(marker)) // one cluster per host: use the running one
	}
	logw := logWriter{log}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	c, err := localcluster.Load(dir)
	switch {
	case err == nil:
		log.Info("reusing the local cluster", "dir", dir)
	case errors.Is(err, localcluster.ErrNotRunning):
		log.Info("starting a local cluster", "dir", dir)
		if c, err = localcluster.Up(ctx, localcluster.Config{Dir: dir, Log: logw}); err != nil {
			return nil, nil, err
		}
		if !keep {
			stops = append(stops, func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				if err := c.Down(ctx); err != nil {
					log.Error("cluster down", "err", err)
				}
			})
		}
	default:
		return nil, nil, err
	}
	fail := func(err error) (*env, func(), error) {
		stop()
		return nil, nil, err
	}
	if len(c.Nodes) == 0 {
		return fail(fmt.Errorf("local cluster %s has no nodes", dir))
	}
	deploy := exec.CommandContext(ctx, filepath.Join(root, "hack", "deploy-local.sh"))
	deploy.Env = append(os.Environ(), "CLUSTER_DIR="+c.Dir, "RESTART=1")
	deploy.Stdout, deploy.Stderr = logw, logw
	if err := deploy.Run(); err != nil {
		return fail(fmt.Errorf("hack/deploy-local.sh: %w", err))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fail(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	socket := filepath.Join(c.Nodes[0].Dir, "nodevirt", "agent.sock")
	e = &env{
		root: root, cluster: c, node: c.Nodes[0], log: log,
		kube: kubernetes.NewForConfigOrDie(rc),
		virt: versioned.NewForConfigOrDie(rc),
		csi:  snapclientset.NewForConfigOrDie(rc),
		nodeAPI: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}},
		nodectl: api.NewClient(socket),
		http:    &http.Client{Timeout: 30 * time.Second},
	}
	if err := e.resetNamespace(ctx); err != nil {
		return fail(err)
	}
	obsCtx, obsCancel := context.WithCancel(context.Background())
	stops = append(stops, obsCancel)
	if e.vmis, err = newObserver(obsCtx, e.virt, benchNamespace); err != nil {
		return fail(err)
	}
	stops = append(stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := e.deleteNamespace(ctx); err != nil {
			log.Error("delete the benchmark namespace", "err", err)
		}
	})
	return e, stop, nil
}

// resetNamespace deletes the benchmark namespace if an earlier run left
// it, then creates it.
func (e *env) resetNamespace(ctx context.Context) error {
	if err := e.deleteNamespace(ctx); err != nil {
		return err
	}
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", benchNamespace, err)
	}
	return nil
}

// deleteNamespace deletes the benchmark namespace and waits until it is
// gone (the agent stops the guests and removes the VMI finalizers first).
func (e *env) deleteNamespace(ctx context.Context) error {
	err := e.kube.CoreV1().Namespaces().Delete(ctx, benchNamespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", benchNamespace, err)
	}
	return poll(ctx, 10*time.Minute, time.Second, "namespace "+benchNamespace+" gone", func() (bool, error) {
		_, err := e.kube.CoreV1().Namespaces().Get(ctx, benchNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// deleteVMIs deletes every VMI of the benchmark namespace, concurrently
// and one by one (a DeleteCollection of thousands outlasts the API
// server's request timeout), and waits until they and their launcher pods
// are gone.
func (e *env) deleteVMIs(ctx context.Context) error {
	client := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace)
	list, err := client.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list VMIs: %w", err)
	}
	names := make([]string, len(list.Items))
	for i, vmi := range list.Items {
		names[i] = vmi.Name
	}
	if err := forEach(ctx, names, 32, func(name string) error {
		err := client.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete VMI %s: %w", name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	return poll(ctx, 15*time.Minute, time.Second, "VMIs and launcher pods gone", func() (bool, error) {
		vmis, err := client.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		pods, err := e.kube.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		return len(vmis.Items) == 0 && len(pods.Items) == 0, fmt.Errorf("%d VMIs and %d pods left", len(vmis.Items), len(pods.Items))
	})
}

// forEach calls fn for every item with up to workers calls at once and
// returns the first error (the remaining items are skipped).
func forEach[T any](ctx context.Context, items []T, workers int, fn func(T) error) error {
	next := make(chan T)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := fn(it); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for _, it := range items {
		select {
		case next <- it:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

// createVMI creates vmi in the benchmark namespace and returns the time
// just before the request went out.
func (e *env) createVMI(ctx context.Context, vmi *v1.VirtualMachineInstance) (time.Time, error) {
	vmi.Namespace = benchNamespace
	start := time.Now()
	if _, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		return start, fmt.Errorf("create VMI %s: %w", vmi.Name, err)
	}
	return start, nil
}

// launcherPod returns the launcher pod of the VMI with uid.
func (e *env) launcherPod(ctx context.Context, uid string) (*corev1.Pod, error) {
	pods, err := e.kube.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + uid})
	if err != nil {
		return nil, fmt.Errorf("launcher pod of VMI %s: %w", uid, err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("VMI %s has no launcher pod", uid)
}

// agentPod returns the running agent pod of the benchmark's node.
func (e *env) agentPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := e.kube.CoreV1().Pods("nodevirt").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nodevirt-agent",
		FieldSelector: "spec.nodeName=" + e.node.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("agent pod: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running agent pod on %s", e.node.Name)
}

// podDir is the host path of an emptyDir volume of pod uid.
func (e *env) emptyDir(podUID, volume string) string {
	return filepath.Join(e.node.KubeletRoot, "pods", podUID, "volumes", "kubernetes.io~empty-dir", volume)
}

// poll calls cond every interval until it returns true, fails, or timeout
// passes; the last error cond returned with false explains a timeout.
func poll(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// logWriter sends script output to the log, a line per write.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.log.Info(l)
	}
	return len(p), nil
}

var _ io.Writer = logWriter{}
