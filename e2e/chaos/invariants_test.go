package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/store"
)

// settle bounds how long the records may disagree with the API server
// after a fault (an informer resync, a status patch retried after an
// outage).
const settle = time.Minute

// checkAfterFault checks the residents and the records' agreement with the
// API server; it returns the broken invariants.
func (h *harness) checkAfterFault(t *testing.T) []string {
	t.Helper()
	v := h.checkResidents(t.Context())
	if err := await(t.Context(), settle, func() error { return h.recordsAgree(t.Context()) }); err != nil {
		v = append(v, err.Error())
	}
	return v
}

// recordsAgree compares the agent's records (node API) with the API
// server's VMIs: a live record of a VMI that is gone or final, or a
// running VMI of this node without a live record, is a disagreement.
func (h *harness) recordsAgree(ctx context.Context) error {
	recs, err := h.records(ctx)
	if err != nil {
		return err
	}
	list, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	vmis := map[types.UID]v1.VirtualMachineInstance{}
	for _, vmi := range list.Items {
		vmis[vmi.UID] = vmi
	}
	live := map[types.UID]store.Record{}
	var problems []string
	for _, r := range recs {
		if r.IsGone() || r.Namespace != namespace {
			continue
		}
		live[types.UID(r.UID)] = r
		vmi, ok := vmis[types.UID(r.UID)]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("live record %s/%s (%s, %s) of a VMI the API server does not have", r.Name, r.UID, r.Observed.Phase, r.Observed.RunState))
		case vmi.Status.Phase.IsFinal() && r.Observed.Phase == string(v1.Running):
			problems = append(problems, fmt.Sprintf("VMI %s/%s %s, its record Running", r.Name, r.UID, vmi.Status.Phase))
		}
	}
	for _, vmi := range list.Items {
		if vmi.Status.Phase == v1.Running && vmi.Status.NodeName == h.node.Name && vmi.DeletionTimestamp == nil {
			if _, ok := live[vmi.UID]; !ok {
				problems = append(problems, fmt.Sprintf("VMI %s/%s Running on %s without a live record", vmi.Name, vmi.UID, h.node.Name))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("records disagree with the API server: %s", strings.Join(problems, "; "))
	}
	return nil
}

// records are the agent's records through its node API socket.
func (h *harness) records(ctx context.Context) ([]store.Record, error) {
	return recordsOf(ctx, h.node)
}

// recordsOf are node n's agent's records.
func recordsOf(ctx context.Context, n localcluster.Node) ([]store.Record, error) {
	c := api.NewClient(filepath.Join(n.Dir, "nodevirt", "agent.sock"))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Domains(ctx)
}

// finalChecks deletes every VM of the run and checks nothing is left: no
// VMI, no QEMU of the namespace, no live record, no mount or directory
// (sockets) of a launcher pod the run saw, no bridge, tap or nodevirt
// nftables table in any pod network namespace or the host's.
func (h *harness) finalChecks(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	h.checkMigrations()
	if v := h.checkResidents(ctx); len(v) > 0 {
		for _, x := range v {
			h.violate("at the end: " + x)
		}
	}
	if _, err := h.cluster.KubectlText(3*time.Minute, nil, "delete", "vm", "-n", namespace, "--all", "--wait=true", "--timeout=150s"); err != nil {
		h.violate(fmt.Sprintf("at the end: delete every VM: %v", err))
	}
	check := func(what string, cond func() error) {
		if err := await(ctx, 3*time.Minute, cond); err != nil {
			h.violate(fmt.Sprintf("at the end: %s: %v", what, err))
		}
	}
	check("no VMI left", func() error {
		list, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(list.Items); n > 0 {
			return fmt.Errorf("%d VMI(s) left, first %s (finalizers %v)", n, list.Items[0].Name, list.Items[0].Finalizers)
		}
		return nil
	})
	check("no QEMU of the run left", func() error {
		if pids := qemusOf(namespace); len(pids) > 0 {
			return fmt.Errorf("QEMU pids %v", pids)
		}
		return nil
	})
	check("no live record left on any node", func() error {
		for _, n := range h.cluster.Nodes {
			recs, err := recordsOf(ctx, n)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if !r.IsGone() && r.Namespace == namespace {
					return fmt.Errorf("live record %s/%s (%s) on %s", r.Name, r.UID, r.Observed.Phase, n.Name)
				}
			}
		}
		return nil
	})
	check("no network plumbing left (bridges, taps, nftables tables)", func() error {
		left, err := networkLeftovers()
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%s", strings.Join(left, "; "))
		}
		return nil
	})
	check("no directory of a launcher pod left (its sockets, serial log, volumes)", func() error {
		var roots []string
		for _, n := range h.cluster.Nodes {
			roots = append(roots, n.KubeletRoot)
		}
		h.mu.Lock()
		left := podDirsLeft(roots, h.launchers)
		h.mu.Unlock()
		if len(left) > 0 {
			return fmt.Errorf("%d left, first %s", len(left), left[0])
		}
		return nil
	})
	check("no mount of a launcher pod left", func() error {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, line := range strings.Split(string(b), "\n") {
			for uid := range h.launchers {
				if strings.Contains(line, "/pods/"+uid+"/") {
					return fmt.Errorf("mount of pod %s: %s", uid, line)
				}
			}
		}
		return nil
	})
}

// qemusOf lists the QEMU processes of VMIs in namespace ns (their
// -name guest=<ns>_<name>).
func qemusOf(ns string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.Contains(string(b), "guest="+ns+"_") {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "qemu-system") {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(filepath.Dir(d)), "%d", &pid)
		out = append(out, pid)
	}
	return out
}
