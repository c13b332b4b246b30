package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// controllerLease is the controller's leader election Lease (deploy/controller).
const controllerLease = "nodevirt-controller"

// runController creates n VMIs that no node can take and measures how
// fast the controller turns them into launcher pods (VMI phase
// Scheduling) and its RSS growth per VMI.
func runController(ctx context.Context, e *env, r *Report, n, workers int) error {
	const sc = "controller"
	pid, err := e.controllerPid(ctx)
	if err != nil {
		return err
	}
	before, err := rss(pid)
	if err != nil {
		return err
	}
	first := time.Now()
	if err := createNowhere(ctx, e, n, workers); err != nil {
		return err
	}
	created := time.Since(first)
	e.log.Info("controller scale: VMIs created", "n", n, "took", created)
	if err := e.vmis.waitCount(ctx, "phase="+string(v1.Scheduling), n, 60*time.Minute); err != nil {
		return err
	}
	all := time.Since(first)
	pods, err := e.kube.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list launcher pods: %w", err)
	}
	time.Sleep(5 * time.Second)
	after, err := rss(pid)
	if err != nil {
		return fmt.Errorf("controller pid %d (restarted during the run?): %w", pid, err)
	}
	perVMI := float64(after-before) / float64(n) / 1024
	r.add(
		summarize(sc, fmt.Sprintf("controller RSS growth per VMI (%d VMIs)", n), "KiB", []float64{perVMI}),
		summarize(sc, fmt.Sprintf("controller RSS (%d VMIs)", n), "MiB", []float64{float64(after) / mib}),
		summarize(sc, "controller RSS idle (before)", "MiB", []float64{float64(before) / mib}),
		summarize(sc, "sync throughput: VMIs to Scheduling (pod created) per second", "VMIs/s", []float64{float64(n) / all.Seconds()}),
		summarize(sc, fmt.Sprintf("first creation → all %d Scheduling", n), "s", []float64{all.Seconds()}),
		summarize(sc, "creation rate of the benchmark client", "VMIs/s", []float64{float64(n) / created.Seconds()}),
	)
	r.note(sc, "%d VMIs with a nodeSelector no node matches (their launcher pods stay Pending), created by %d concurrent clients; %d launcher pods exist at the end. The leader's RSS is read from /proc on the host.", n, workers, len(pods.Items))
	return nil
}

// createNowhere creates n unschedulable VMIs with workers concurrent
// requests.
func createNowhere(ctx context.Context, e *env, n, workers int) error {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return forEach(ctx, idx, workers, func(i int) error {
		vmi, err := newVMI(nowhereVMI, fmt.Sprintf("scale-%05d", i))
		if err != nil {
			return err
		}
		_, err = e.createVMI(ctx, vmi)
		return err
	})
}

// controllerPid is the host pid of the leading controller replica.
func (e *env) controllerPid(ctx context.Context) (int, error) {
	lease, err := e.kube.CoordinationV1().Leases("nodevirt").Get(ctx, controllerLease, getOpts)
	if err != nil {
		return 0, fmt.Errorf("controller lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return 0, errors.New("controller lease has no holder")
	}
	podName := *lease.Spec.HolderIdentity
	if i := strings.LastIndex(podName, "_"); i > 0 {
		podName = podName[:i] // identity is <hostname>_<pid>
	}
	pod, err := e.kube.CoreV1().Pods("nodevirt").Get(ctx, podName, getOpts)
	if err != nil {
		return 0, fmt.Errorf("controller leader pod: %w", err)
	}
	ps, err := localcluster.PodProcesses(string(pod.UID))
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Comm, "nodevirt-contro") {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("controller pod %s: no controller process", pod.Name)
}
