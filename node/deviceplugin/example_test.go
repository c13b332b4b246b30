package deviceplugin_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// The node agent offers whatever this host has, until it stops.
func Example() {
	ctx := context.Background() // the agent's lifetime
	host := os.DirFS("/")
	kvm := convert.DetectKVM(host)
	devs := deviceplugin.HostDevices(host, kvm.Usable)
	log := slog.Default().With("component", "deviceplugin")
	log.Info("offering devices", "devices", devs, "kvmUsable", kvm.Usable, "why", kvm.Reason)
	go func() {
		// Returns nil once ctx is cancelled; an error only for a bad Config.
		if err := deviceplugin.Run(ctx, deviceplugin.Config{Logger: log}, devs); err != nil {
			log.Error("device plugins", "err", err)
		}
	}()
}
