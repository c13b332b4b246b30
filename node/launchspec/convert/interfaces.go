package convert

import (
	"fmt"
	"net"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// nicModels maps interfaces[].model to QEMU device drivers.
var nicModels = map[string]string{
	"virtio":   "virtio-net-pci",
	"e1000":    "e1000",
	"e1000e":   "e1000e",
	"rtl8139":  "rtl8139",
	"pcnet":    "pcnet",
	"ne2k_pci": "ne2k_pci",
}

func (b *builder) interfaces() error {
	ifaces := b.vmi.Spec.Domain.Devices.Interfaces
	nics := map[string]NIC{}
	for _, n := range b.in.Interfaces {
		nics[n.Name] = n
	}
	if len(ifaces) == 0 && len(b.in.Interfaces) == 1 {
		// The default pod interface the agent added (autoattachPodInterface).
		ifaces = []v1.Interface{{Name: b.in.Interfaces[0].Name}}
	}
	for i, iface := range ifaces {
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		nic, ok := nics[iface.Name]
		if !ok {
			return fmt.Errorf("%w: %s: no network result for interface %q", ErrInvalid, field, iface.Name)
		}
		model := iface.Model
		if model == "" {
			model = v1.DefaultInterfaceModel
		}
		driver, ok := nicModels[model]
		if !ok {
			return fmt.Errorf("%w: %s.model %q", ErrUnsupported, field, model)
		}
		mac, err := net.ParseMAC(nic.MAC)
		if err != nil || len(mac) != 6 {
			return fmt.Errorf("%w: %s: MAC %q", ErrInvalid, field, nic.MAC)
		}
		if nic.Tap == "" || len(nic.Tap) > 15 {
			return fmt.Errorf("%w: %s: tap name %q", ErrInvalid, field, nic.Tap)
		}
		id := fmt.Sprintf("net%d", i)
		b.add("-netdev", jsonArg(map[string]any{"type": "tap", "id": id, "ifname": nic.Tap,
			"script": "no", "downscript": "no"}))
		b.device(map[string]any{"driver": driver, "netdev": id, "id": id + "-dev", "mac": mac.String()})
		b.devices = append(b.devices, launchspec.Device{Kind: launchspec.DeviceInterface, Name: iface.Name, ID: id + "-dev", Node: id})
	}
	return nil
}
