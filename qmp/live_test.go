package qmp_test

// Tests against real QEMU (TCG) booting the test guest.

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitEvent returns the next event named name from sub.
func waitEvent(t testing.TB, sub *qmp.Subscription, name string, timeout time.Duration) qmp.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("waiting for %s: connection closed", name)
			}
			if e.Name == name {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within %v", name, timeout)
		}
	}
}

// guestUptime reads /proc/uptime through the guest agent.
func guestUptime(t testing.TB, a *qmp.Agent) float64 {
	t.Helper()
	st, err := a.Run(ctxT(t, 10*time.Second), "/bin/cat", "/proc/uptime")
	if err != nil {
		t.Fatalf("guest-exec cat /proc/uptime: %v", err)
	}
	f := strings.Fields(string(st.OutData))
	if len(f) == 0 {
		t.Fatalf("guest /proc/uptime output %q", st.OutData)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("guest /proc/uptime: %v", err)
	}
	return up
}

// TestQEMU_KernelBootLifecycle boots vmlinux + initrd.img and walks a VM
// through queries, pause/resume, the guest agent, ballooning, hotplug, a
// reset (the agent re-syncs) and ACPI power-down.
func TestQEMU_KernelBootLifecycle(t *testing.T) {
	t.Parallel()
	vm := startVM(t, vmConfig{
		Reboot: true,
		Args:   []string{"-chardev", "null,id=spare"},
	})
	c := vm.DialQMP(t)
	t.Logf("QEMU exec -> QMP ready: %v", time.Since(vm.started))
	events := c.Subscribe(64)
	if v := c.Greeting().Version.QEMU; v.Major < 7 {
		t.Errorf("QEMU version %+v", v)
	}

	ready := vm.WaitSerial(t, readyMarker, 1, bootTimeout)
	t.Logf("boot: %q after %v", ready, time.Since(vm.started))
	a := vm.DialAgent(t)
	t.Logf("guest agent answers %v after start", time.Since(vm.started))

	t.Run("queries", func(t *testing.T) {
		ctx := ctxT(t, 10*time.Second)
		st, err := c.QueryStatus(ctx)
		if err != nil || !st.Running || st.Status != qmp.RunStateRunning {
			t.Errorf("QueryStatus = %+v, %v; want running", st, err)
		}
		kvm, err := c.QueryKVM(ctx)
		if err != nil || kvm.Enabled {
			t.Errorf("QueryKVM = %+v, %v; want enabled=false under TCG", kvm, err)
		}
		cpus, err := c.QueryCPUsFast(ctx)
		if err != nil || len(cpus) != 1 || cpus[0].ThreadID <= 0 || cpus[0].Target != "x86_64" {
			t.Errorf("QueryCPUsFast = %+v, %v", cpus, err)
		}
		devs, err := c.QueryChardev(ctx)
		var labels []string
		for _, d := range devs {
			labels = append(labels, d.Label)
		}
		if err != nil || !slices.Contains(labels, "qga0") || !slices.Contains(labels, "ser0") {
			t.Errorf("QueryChardev labels = %v, %v", labels, err)
		}
		if _, err := c.QueryBlockstats(ctx); err != nil {
			t.Errorf("QueryBlockstats: %v", err)
		}
		mi, err := c.QueryMigrate(ctx)
		if err != nil || mi.Status != "" {
			t.Errorf("QueryMigrate before any migration = %+v, %v", mi, err)
		}
	})

	t.Run("pause-resume", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		t0 := time.Now()
		before := guestUptime(t, a)
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		pause := time.Now() // the guest is stopped from here until Cont
		waitEvent(t, events, qmp.EventStop, 5*time.Second)
		if st, err := c.QueryStatus(ctx); err != nil || st.Status != qmp.RunStatePaused {
			t.Errorf("status after stop = %+v, %v", st, err)
		}
		// The agent cannot answer while the vCPUs are stopped.
		if err := a.Ping(ctxT(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Ping while paused = %v, want DeadlineExceeded", err)
		}
		time.Sleep(time.Until(pause.Add(1500 * time.Millisecond))) // the pause whose length we measure
		paused := time.Since(pause)
		if err := c.Cont(ctx); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, events, qmp.EventResume, 5*time.Second)
		if st, err := c.QueryStatus(ctx); err != nil || st.Status != qmp.RunStateRunning {
			t.Errorf("status after cont = %+v, %v", st, err)
		}
		// The guest clock stood still while paused (and the agent re-syncs):
		// between the two readings it advanced by at most the unpaused time.
		after := guestUptime(t, a)
		wall := time.Since(t0).Seconds()
		if gap := after - before; gap > wall-paused.Seconds()+0.2 {
			t.Errorf("guest uptime advanced %.2fs in %.2fs wall time with a %.2fs pause", gap, wall, paused.Seconds())
		} else {
			t.Logf("guest uptime advanced %.2fs in %.2fs wall time with a %.2fs pause", gap, wall, paused.Seconds())
		}
	})

	t.Run("agent", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		if err := a.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := a.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range info.Commands {
			names = append(names, c.Name)
		}
		for _, want := range []string{"guest-exec", "guest-exec-status", "guest-get-osinfo", "guest-shutdown"} {
			if !slices.Contains(names, want) {
				t.Errorf("guest-info lacks %s", want)
			}
		}
		os, err := a.OSInfo(ctx)
		if err != nil || os.ID != "nodevirt-guest" || os.KernelRelease == "" {
			t.Errorf("OSInfo = %+v, %v", os, err)
		}
		if h, err := a.HostName(ctx); err != nil || h != "nodevirt-guest" {
			t.Errorf("HostName = %q, %v", h, err)
		}
		if _, err := a.FSInfo(ctx); err != nil {
			t.Errorf("FSInfo: %v", err)
		}
		if _, err := a.Users(ctx); err != nil {
			t.Errorf("Users: %v", err)
		}
		if _, err := a.Timezone(ctx); err != nil {
			t.Errorf("Timezone: %v", err)
		}
		ifs, err := a.NetworkInterfaces(ctx)
		var ifnames []string
		for _, i := range ifs {
			ifnames = append(ifnames, i.Name)
		}
		if err != nil || !slices.Contains(ifnames, "lo") {
			t.Errorf("NetworkInterfaces = %v, %v", ifnames, err)
		}
		if s, err := a.FSFreezeStatus(ctx); err != nil || s != "thawed" {
			t.Errorf("FSFreezeStatus = %q, %v", s, err)
		}
		if up := guestUptime(t, a); up <= 0 {
			t.Errorf("uptime %v", up)
		}
		if _, err := a.Exec(ctx, "/no/such/binary"); err == nil {
			t.Error("Exec of a missing binary succeeded")
		}
	})

	t.Run("balloon", func(t *testing.T) {
		ctx := ctxT(t, 30*time.Second)
		b, err := c.QueryBalloon(ctx)
		if err != nil || b.Actual != 256<<20 {
			t.Fatalf("QueryBalloon = %+v, %v", b, err)
		}
		const path = "/machine/peripheral/balloon0"
		if err := c.SetBalloonStatsInterval(ctx, path, 1); err != nil {
			t.Fatal(err)
		}
		for {
			st, err := c.QueryBalloonStats(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if st.LastUpdate > 0 && st.Stats["stat-total-memory"] > 0 {
				t.Logf("balloon stats: %v", st.Stats)
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no balloon stats: %+v", st)
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err := c.Balloon(ctx, 224<<20); err != nil {
			t.Fatal(err)
		}
		for {
			b, err := c.QueryBalloon(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b.Actual == 224<<20 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("balloon stuck at %d", b.Actual)
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := c.Balloon(ctx, 256<<20); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("hotplug", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		props := map[string]any{"bus": "vser0.0", "chardev": "spare", "name": "nodevirt.test"}
		if err := c.DeviceAdd(ctx, "virtserialport", "port1", props); err != nil {
			t.Fatal(err)
		}
		if err := c.DeviceDel(ctx, "port1"); err != nil {
			t.Fatal(err)
		}
		e := waitEvent(t, events, qmp.EventDeviceDeleted, 10*time.Second)
		if v, err := e.Typed(); err != nil || v.(*qmp.DeviceDeletedEvent).Device != "port1" {
			t.Errorf("DEVICE_DELETED = %+v, %v", v, err)
		}
		if err := c.DeviceDel(ctx, "port1"); !qmp.IsClass(err, qmp.ClassDeviceNotFound) {
			t.Errorf("DeviceDel of a missing device = %v, want class DeviceNotFound", err)
		}
	})

	t.Run("reset-agent-resyncs", func(t *testing.T) {
		ctx := ctxT(t, bootTimeout)
		if err := c.SystemReset(ctx); err != nil {
			t.Fatal(err)
		}
		e := waitEvent(t, events, qmp.EventReset, 5*time.Second)
		if v, err := e.Typed(); err != nil || v.(*qmp.ResetEvent).Guest {
			t.Errorf("RESET = %+v, %v; want a host reset", v, err)
		}
		vm.WaitSerial(t, readyMarker, 2, bootTimeout)
		start := time.Now()
		waitAgent(t, ctx, a) // the same Agent, across the reboot
		if up := guestUptime(t, a); up > 30 {
			t.Errorf("uptime after reset = %v; guest did not reboot?", up)
		}
		t.Logf("agent answered again %v after the second ready marker", time.Since(start))
	})

	t.Run("powerdown", func(t *testing.T) {
		ctx := ctxT(t, 30*time.Second)
		start := time.Now()
		if err := c.SystemPowerdown(ctx); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, events, qmp.EventPowerdown, 5*time.Second)
		vm.WaitSerial(t, "NODEVIRT-GUEST-POWERDOWN", 1, 10*time.Second)
		e := waitEvent(t, events, qmp.EventShutdown, 20*time.Second)
		v, err := e.Typed()
		if err != nil {
			t.Fatal(err)
		}
		if diff := (qmp.ShutdownEvent{Guest: true, Reason: "guest-shutdown"}); *v.(*qmp.ShutdownEvent) != diff {
			t.Errorf("SHUTDOWN = %+v, want %+v", v, diff)
		}
		t.Logf("system_powerdown -> SHUTDOWN: %v", time.Since(start))
		if !vm.Exited(10 * time.Second) {
			t.Error("QEMU still running after guest power-off")
		}
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Error("QMP connection not closed after QEMU exited")
		}
		if err := c.Stop(ctx); !errors.Is(err, qmp.ErrClosed) {
			t.Errorf("Stop after exit = %v, want ErrClosed", err)
		}
	})
	if d := events.Dropped(); d != 0 {
		t.Errorf("dropped %d events", d)
	}
}
