package localcluster

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// hostState is what a cluster may change on the host and must restore.
type hostState struct {
	Links    []string            // nv-* links
	Sysctls  map[string]string   // the settings kubelet, CNI and kube-proxy change
	Iptables map[string][]string // "iptables nat" -> rules (-S)
	NFTables []string            // "table ip nat", ...
	Cgroups  []string            // nodevirt-* and kubepods dirs under /sys/fs/cgroup/*
	NetNS    []string            // cni-* entries of /run/netns
	HostDirs []string            // containerd/CNI directories outside the state dir
}

var watchedSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
	"net.ipv4.conf.all.forwarding", "net.ipv4.conf.all.route_localnet", "net.ipv6.conf.all.forwarding",
	"net.netfilter.nf_conntrack_max", "net.bridge.bridge-nf-call-iptables",
}

func snapshotHost(t *testing.T) hostState {
	t.Helper()
	ctx := context.Background()
	s := hostState{Sysctls: map[string]string{}, Iptables: map[string][]string{}}
	for _, l := range lines(t, ctx, "ip", "-o", "link", "show") {
		// "3: nv-node0: <...>" or "7: veth1234@if2: <...>"
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		// Pod veths die with their netns; the mount check covers leaked ones.
		if strings.HasPrefix(name, "nv-") {
			s.Links = append(s.Links, name)
		}
	}
	for _, k := range watchedSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, tbl := range []string{"nat", "filter", "mangle", "raw"} {
			s.Iptables[ipt+" "+tbl] = lines(t, ctx, ipt, "-w", "-t", tbl, "-S")
		}
	}
	s.NFTables = lines(t, ctx, "nft", "list", "tables")
	for _, pat := range []string{"/sys/fs/cgroup/*/nodevirt-*", "/sys/fs/cgroup/*/kubepods"} {
		m, _ := filepath.Glob(pat)
		s.Cgroups = append(s.Cgroups, m...)
	}
	if des, err := os.ReadDir("/run/netns"); err == nil {
		for _, de := range des {
			// Only CNI's names: other software's netns come and go.
			if strings.HasPrefix(de.Name(), "cni-") {
				s.NetNS = append(s.NetNS, de.Name())
			}
		}
	}
	for _, d := range []string{"/run/containerd", "/var/lib/cni"} {
		if _, err := os.Stat(d); err == nil {
			s.HostDirs = append(s.HostDirs, d)
		}
	}
	sort.Strings(s.Links)
	sort.Strings(s.Cgroups)
	return s
}

// lines runs a command and returns its output lines; a missing command
// yields nothing (the state it would show cannot exist either).
func lines(t *testing.T, ctx context.Context, name string, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		t.Logf("%s %v: %v", name, args, err)
		return nil
	}
	var ls []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// leftovers lists processes and mounts that still reference dir.
func leftovers(t *testing.T, dir string) (procs, mounts []string) {
	t.Helper()
	pids, _ := filepath.Glob("/proc/[0-9]*")
	self := "/proc/" + strconv.Itoa(os.Getpid())
	for _, p := range pids {
		if p == self {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue
		}
		if c := strings.ReplaceAll(string(cmd), "\x00", " "); strings.Contains(c, dir+"/") {
			procs = append(procs, filepath.Base(p)+": "+c)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mountinfo: %v", err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	return procs, mounts
}
