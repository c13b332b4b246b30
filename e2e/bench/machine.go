package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// describeMachine gathers what the report says about the machine.
func describeMachine(ctx context.Context, e *env) Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPU: procField("/proc/cpuinfo", "model name")}
	// MemTotal: "24684032 kB"
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemoryMiB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	kvm := convert.DetectKVM(os.DirFS("/"))
	m.Accel = "KVM"
	if !kvm.Usable {
		m.Accel = "TCG (no usable KVM: " + kvm.Reason + ")"
	}
	if out, err := exec.CommandContext(ctx, "qemu-system-x86_64", "--version").Output(); err == nil {
		m.QEMU, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	if v, err := e.kube.Discovery().ServerVersion(); err == nil {
		m.Kubernetes = v.GitVersion
	}
	if n, err := e.kube.CoreV1().Nodes().Get(ctx, e.node.Name, getOpts); err == nil {
		m.Runtime = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	m.PodShape = "Containers (holder and init containers)"
	if cm, err := e.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, "nodevirt-config", getOpts); err == nil &&
		cm.Data["launcherPodShape"] == "ImageVolumes" {
		m.PodShape = "ImageVolumes (one container, images as image volumes)"
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc
// file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// gitCommit returns HEAD and whether the tree has uncommitted changes.
func gitCommit(ctx context.Context, root string) (string, bool) {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	status, _ := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), len(strings.TrimSpace(string(status))) > 0
}
