package controller_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// testWritesPerStateChange: a standalone VMI costs the controller one VMI
// write per state it reaches before the agent's turn: the status Pending
// and Scheduling (with the pod create), then, when the pod runs, the
// metadata (node label and finalizer together) and the status Scheduled.
// No sync of a version the controller itself replaced ends in a Conflict.
func testWritesPerStateChange(t *testing.T, c *cluster, addr string) {
	ns := c.namespace(t, "writes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	conflicts := vmiConflicts(t, addr)

	c.launch(t, ns, "vmi", v1.VirtualMachineInstanceSpec{})
	vmi := c.waitVMI(t, ns, "vmi", "")
	c.schedule(t, vmi, "node1")
	time.Sleep(2 * time.Second) // any late write would land by now

	var writes []string
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			v, ok := ev.Object.(*v1.VirtualMachineInstance)
			if !ok {
				t.Fatalf("watch: %v %T", ev.Type, ev.Object)
			}
			if ev.Type == watch.Modified {
				writes = append(writes, describeWrite(v))
			}
		case <-time.After(500 * time.Millisecond):
			done = true
		}
	}
	want := []string{"status Scheduling", "metadata node1 finalizer", "status Scheduled"}
	if !slices.Equal(writes, want) {
		t.Errorf("VMI writes until Scheduled:\n got %q\nwant %q", writes, want)
	}
	if got := vmiConflicts(t, addr); got != conflicts {
		t.Errorf("the VMI controller's syncs ended in %d Conflicts", got-conflicts)
	}
}

// describeWrite names what a VMI version shows: its status phase, and its
// node label and finalizer once set.
func describeWrite(v *v1.VirtualMachineInstance) string {
	if l := v.Labels[v1.NodeNameLabel]; l != "" && v.Status.Phase == v1.Scheduling {
		s := "metadata " + l
		if slices.Contains(v.Finalizers, v1.VirtualMachineInstanceFinalizer) {
			s += " finalizer"
		}
		return s
	}
	return "status " + string(v.Status.Phase)
}

// vmiConflicts is the count of the VMI controller's syncs that ended in a
// Conflict, from the controller's /metrics.
func vmiConflicts(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	const series = `nodevirt_controller_sync_duration_seconds_count{controller="vmi",result="conflict"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s%s: %v", series, v, err)
			}
			return n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return 0
}
