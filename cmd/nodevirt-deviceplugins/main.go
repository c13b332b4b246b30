// Command nodevirt-deviceplugins serves the node's device plugins
// (devices.kubevirt.io/kvm, tun and vhost-net; node/deviceplugin) in a
// process of its own: the agent DaemonSet runs it as a second container,
// so a killed or restarting agent does not take the devices away from the
// kubelet. A plugin whose process dies is marked unhealthy by the kubelet
// at once: every launcher pod admitted until it is back — a new VM, a
// migration target — would fail with UnexpectedAdmissionError, and the
// scheduler would see no free device on the node.
//
// It holds no state and talks to nothing but the kubelet; it re-registers
// on its own when the kubelet restarts.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodevirt-deviceplugins:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dir      = flag.String("dir", deviceplugin.DefaultDir, "the kubelet's device-plugin directory")
		hostRoot = flag.String("host-root", "/", "the host's root, for the KVM check and device health")
		count    = flag.Int("count", 0, "devices advertised per resource (0: the kubelet's default pod limit, 110)")
		logLevel = flag.String("log-level", "info", "debug, info, warn or error")
	)
	flag.Parse()
	var l slog.Level
	if err := l.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level %q: %w", *logLevel, err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	host := os.DirFS(*hostRoot)
	kvm := convert.DetectKVM(host)
	devs := deviceplugin.HostDevices(host, kvm.Usable)
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		names = append(names, d.Resource)
	}
	log.Info("serving device plugins", "resources", names, "dir", *dir, "kvm", kvm.Usable, "kvmReason", kvm.Reason)
	if len(devs) == 0 {
		// Nothing to offer (no tun either): stay up, so that the pod
		// does not crash-loop over a host without the devices.
		<-ctx.Done()
		return nil
	}
	err := deviceplugin.Run(ctx, deviceplugin.Config{Dir: *dir, Host: host, Count: *count, Logger: log}, devs)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
