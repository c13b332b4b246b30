package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

const mib = 1 << 20

// agentProcess is the agent's process name in its pod.
const agentProcess = "nodevirt-agent"

// createPaused creates paused VMIs named prefix-NNN numbered from..to-1,
// every interval (0: as fast as the API takes them), and returns the
// creation times by name.
func createPaused(ctx context.Context, e *env, prefix string, from, to int, interval time.Duration) (map[string]time.Time, error) {
	created := map[string]time.Time{}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for i := from; i < to; i++ {
		if tick != nil && i > from {
			select {
			case <-ctx.Done():
				return created, ctx.Err()
			case <-tick:
			}
		}
		name := vmiName(prefix, i)
		vmi, err := newVMI(pausedVMI, name)
		if err != nil {
			return created, err
		}
		at, err := e.createVMI(ctx, vmi)
		if err != nil {
			return created, err
		}
		created[name] = at
	}
	return created, nil
}

// vmiName is the name createPaused gives the i-th VMI of prefix.
func vmiName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }

// agentRSS is the agent process's RSS in bytes.
func (e *env) agentRSS(ctx context.Context) (int64, error) {
	pod, err := e.agentPod(ctx)
	if err != nil {
		return 0, err
	}
	pid, err := localcluster.PodProcess(string(pod.UID), agentProcess)
	if err != nil {
		return 0, err
	}
	return rss(pid)
}

// vmMemory is one VM's memory as the host sees it.
type vmMemory struct {
	launcher     int64 // every process of the pod but QEMU: launcher, containerDisk holders, pause
	qemu         int64 // QEMU's RSS
	guestTouched int64 // the part of QEMU's RSS that is guest RAM
	podRequest   int64 // the pod's memory request (containers' sum)
	guest        int64 // spec.domain.memory.guest
}

// measureVM reads the memory of the VMI's pod processes.
func (e *env) measureVM(ctx context.Context, vmi *v1.VirtualMachineInstance) (vmMemory, error) {
	var m vmMemory
	pod, err := e.launcherPod(ctx, string(vmi.UID))
	if err != nil {
		return m, err
	}
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			m.podRequest += q.Value()
		}
	}
	if g := vmi.Spec.Domain.Memory; g != nil && g.Guest != nil {
		m.guest = g.Guest.Value()
	}
	ps, err := localcluster.PodProcesses(string(pod.UID))
	if err != nil {
		return m, err
	}
	qemu := 0
	for _, p := range ps {
		n, err := rss(p.PID)
		if err != nil {
			return m, fmt.Errorf("VMI %s: %w", vmi.Name, err)
		}
		if strings.HasPrefix(p.Comm, "qemu-system") {
			qemu++
			m.qemu = n
			if m.guestTouched, err = guestRAMResident(p.PID, m.guest); err != nil {
				return m, fmt.Errorf("VMI %s: %w", vmi.Name, err)
			}
			continue
		}
		m.launcher += n
	}
	if qemu != 1 {
		return m, fmt.Errorf("VMI %s: %d QEMU processes in pod %s, want 1", vmi.Name, qemu, pod.Name)
	}
	return m, nil
}

// measureOverhead measures the per-VM memory of the n running VMIs of the
// benchmark namespace and the agent's /metrics scrape time.
func measureOverhead(ctx context.Context, e *env, r *Report, n int, agentBaseline int64) error {
	const sc = "overhead"
	vmis, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list VMIs: %w", err)
	}
	if len(vmis.Items) != n {
		return fmt.Errorf("%d VMIs in %s, want %d", len(vmis.Items), benchNamespace, n)
	}
	time.Sleep(5 * time.Second) // let the agent finish what the last start queued
	agent, err := e.agentRSS(ctx)
	if err != nil {
		return err
	}
	agentPerVM := float64(agent-agentBaseline) / float64(n)
	var launcher, qemu, qemuOver, total, request, requestOver []float64
	for i := range vmis.Items {
		m, err := e.measureVM(ctx, &vmis.Items[i])
		if err != nil {
			return err
		}
		launcher = append(launcher, float64(m.launcher)/mib)
		qemu = append(qemu, float64(m.qemu)/mib)
		qemuOver = append(qemuOver, float64(m.qemu-m.guestTouched)/mib)
		total = append(total, (float64(m.launcher+m.qemu-m.guestTouched)+agentPerVM)/mib)
		request = append(request, float64(m.podRequest)/mib)
		requestOver = append(requestOver, float64(m.podRequest-m.guest)/mib)
	}
	at := fmt.Sprintf(" at %d VMs", n)
	if n == 1 {
		at = " at 1 VM"
	}
	kv := func(f Figure, s string) Figure {
		if n == 1 {
			f.KubeVirt = s
		}
		return f
	}
	r.add(
		kv(summarize(sc, "overhead per VM"+at, "MiB", total), "300–370 MiB observed"),
		summarize(sc, "launcher pod processes but QEMU, RSS"+at, "MiB", launcher),
		summarize(sc, "QEMU RSS"+at, "MiB", qemu),
		summarize(sc, "QEMU RSS minus guest RAM it touched"+at, "MiB", qemuOver),
		summarize(sc, "agent RSS growth per VM"+at, "MiB", []float64{agentPerVM / mib}),
		summarize(sc, "agent RSS"+at, "MiB", []float64{float64(agent) / mib}),
		summarize(sc, "pod memory request"+at, "MiB", request),
		kv(summarize(sc, "pod memory request minus guest memory"+at, "MiB", requestOver), "~290 MiB computed"),
	)
	scrapes, series, err := e.scrapeTimes(ctx, 20)
	if err != nil {
		return err
	}
	r.add(summarize(sc, fmt.Sprintf("agent /metrics scrape time%s (%d kubevirt_* series)", at, series), "ms", millis(scrapes)))
	e.log.Info("overhead", "vms", n, "agentRSS", agent, "agentPerVM", agentPerVM, "scrape", summarize("", "", "", millis(scrapes)).Median)
	return nil
}
