package launcher_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// probeScript is NoCloud user-data that prints what the guest sees of the
// domain fields, one "KEY=value" line each.
const probeScript = `#!/bin/sh
echo "PROBE-RNG=$(cat /sys/class/misc/hw_random/rng_available)"
echo "PROBE-UUID=$(cat /sys/class/dmi/id/product_uuid)"
echo "PROBE-SERIAL=$(cat /sys/class/dmi/id/product_serial)"
echo "PROBE-CLOCKSOURCES=$(cat /sys/devices/system/clocksource/clocksource0/available_clocksource)"
echo "PROBE-EPOCH=$(date +%s)"
echo "PROBE-I6300ESB=$(cat /sys/bus/pci/devices/*/device | grep -c 0x25ab)"
echo "PROBE-ACPI=$(test -d /sys/firmware/acpi/tables && echo yes || echo no)"
echo "PROBE-EFI=$(test -d /sys/firmware/efi && echo yes || echo no)"
echo "PROBE-SECUREBOOT=$(dmesg | grep -o 'Secure boot [a-z]*' | head -n 1)"
echo "PROBE-TPM=$(cat /sys/class/tpm/tpm0/tpm_version_major 2>/dev/null || echo none)"
`

const (
	probeUUID   = "5d307ca9-b3ef-428c-8861-06e72d69f223"
	probeSerial = "SN-4711, rack=3" // a comma and an '=': escaped on the way to -smbios
	probeOffset = 3 * 24 * 3600     // clock.utc.offsetSeconds
)

// domainFieldsVMI is the test VMI with the issue-19 fields KubeVirt's
// examples use: rng, firmware uuid/serial, features, clock, watchdog,
// tablets, a vTPM.
func domainFieldsVMI(t *testing.T, efi *v1.EFI) *v1.VirtualMachineInstance {
	t.Helper()
	vmi := testVMI(30, kernelBoot("console=ttyS0 quiet panic=-1"))
	vmi.Spec.Volumes[0].CloudInitNoCloud.UserData = probeScript
	d := &vmi.Spec.Domain
	d.Firmware.UUID = probeUUID
	d.Firmware.Serial = probeSerial
	if efi != nil {
		d.Firmware.Bootloader = &v1.Bootloader{EFI: efi}
	}
	off := false
	offset := probeOffset
	spin := uint32(8191)
	d.Features = &v1.Features{
		ACPI: v1.FeatureState{}, APIC: &v1.FeatureAPIC{}, SMM: &v1.FeatureState{},
		Hyperv: &v1.FeatureHyperv{Relaxed: &v1.FeatureState{}, VAPIC: &v1.FeatureState{},
			Spinlocks: &v1.FeatureSpinlocks{Retries: &spin}},
	}
	d.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{OffsetSeconds: &offset}},
		Timer: &v1.Timer{HPET: &v1.HPETTimer{Enabled: &off}, Hyperv: &v1.HypervTimer{},
			PIT: &v1.PITTimer{TickPolicy: v1.PITTickPolicyDelay}, RTC: &v1.RTCTimer{TickPolicy: v1.RTCTickPolicyCatchup}}}
	d.Devices.Rng = &v1.Rng{}
	d.Devices.TPM = &v1.TPMDevice{}
	d.Devices.Watchdog = &v1.Watchdog{Name: "wd", WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{Action: v1.WatchdogActionPoweroff}}}
	d.Devices.Inputs = []v1.Input{{Name: "tablet", Type: v1.InputTypeTablet, Bus: v1.InputBusUSB}}
	return vmi
}

// bootProbe launches spec in pd and returns the guest's PROBE- lines.
func bootProbe(t *testing.T, pd *pod, spec launchspec.Spec) map[string]string {
	t.Helper()
	_, c := startLauncher(t, pd)
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, c)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	con.waitLine(t, "NODEVIRT-USERDATA-END", 2*bootTimeout)
	got := map[string]string{}
	for _, k := range []string{"RNG", "UUID", "SERIAL", "CLOCKSOURCES", "EPOCH", "I6300ESB", "ACPI", "EFI", "SECUREBOOT", "TPM"} {
		line := con.waitLine(t, "PROBE-"+k+"=", time.Second)
		got[k] = strings.TrimSpace(strings.TrimPrefix(line, "PROBE-"+k+"="))
	}
	t.Logf("guest saw: %q", got)
	return got
}

// checkProbe checks what every variant of the test must see.
func checkProbe(t *testing.T, got map[string]string, started time.Time) {
	t.Helper()
	if !strings.Contains(got["RNG"], "virtio_rng") {
		t.Errorf("rng_available = %q, want virtio_rng (devices.rng)", got["RNG"])
	}
	if got["UUID"] != probeUUID {
		t.Errorf("product_uuid = %q, want %q (firmware.uuid)", got["UUID"], probeUUID)
	}
	if got["SERIAL"] != probeSerial {
		t.Errorf("product_serial = %q, want %q (firmware.serial)", got["SERIAL"], probeSerial)
	}
	if strings.Contains(got["CLOCKSOURCES"], "hpet") {
		t.Errorf("clock sources %q include hpet (clock.timer.hpet.present: false)", got["CLOCKSOURCES"])
	}
	if got["I6300ESB"] != "1" {
		t.Errorf("%s i6300esb PCI devices, want 1 (devices.watchdog)", got["I6300ESB"])
	}
	if got["TPM"] != "2" {
		t.Errorf("/sys/class/tpm/tpm0/tpm_version_major = %q, want 2 (devices.tpm: swtpm beside QEMU)", got["TPM"])
	}
	if got["ACPI"] != "yes" {
		t.Errorf("ACPI tables: %s, want yes (features.acpi)", got["ACPI"])
	}
	epoch, err := strconv.ParseInt(got["EPOCH"], 10, 64)
	if err != nil {
		t.Fatalf("guest epoch %q: %v", got["EPOCH"], err)
	}
	// The guest's clock starts at host UTC + offset (clock.utc.offsetSeconds,
	// the launcher's start-time -rtc base); allow for the boot time.
	want := started.Unix() + probeOffset
	if epoch < want-60 || epoch > time.Now().Unix()+probeOffset+60 {
		t.Errorf("guest time %d, want about %d (host + %d s)", epoch, want, probeOffset)
	}
}

// TestLauncher_DomainFields boots the test guest under TCG with rng,
// firmware uuid and serial, features, clock and watchdog set, and checks
// them from inside the guest (sysfs, printed by NoCloud user-data).
func TestLauncher_DomainFields(t *testing.T) {
	guest := guestDir(t)
	pd := newPod(t)
	spec := prepare(t, pd, guest, domainFieldsVMI(t, nil))
	// The bzImage, not the PVH vmlinux: with a TPM, QEMU 7.2's PVH loader
	// puts the initrd over the ACPI tables SeaBIOS moved down for the TPM
	// log (the guest then runs without ACPI). SeaBIOS's Linux loader
	// places it below them.
	copyFile(t, bzImage(t), pd.paths.Kernel())
	started := time.Now()
	got := bootProbe(t, pd, spec)
	checkProbe(t, got, started)
	if got["EFI"] != "no" {
		t.Errorf("/sys/firmware/efi exists under BIOS")
	}
}

// TestLauncher_EFI boots the test guest through OVMF. OVMF loads the
// kernel given with -kernel through fw_cfg as an EFI application, so the
// guest gets the Debian bzImage (EFI stub) instead of the PVH vmlinux.
// Without secure boot the guest must see /sys/firmware/efi. With secure
// boot (secboot OVMF, MS-enrolled VARS, SMM) the Debian kernel is signed by
// Debian, not Microsoft: the test records what happens and requires that
// QEMU runs the secure-boot firmware with SMM and that the firmware does
// not boot an unsigned-for-this-db kernel as if secure boot were off.
func TestLauncher_EFI(t *testing.T) {
	guest := guestDir(t)
	for _, f := range []string{convert.OVMFCode, convert.OVMFVars, convert.OVMFSecbootCode, convert.OVMFSecbootVars} {
		_, err := os.Stat(f)
		testenv.Require(t, err == nil, f, "guest-deps")
	}
	bz := bzImage(t)
	no, yes := false, true

	t.Run("efi", func(t *testing.T) {
		pd := newPod(t)
		spec := prepare(t, pd, guest, domainFieldsVMI(t, &v1.EFI{SecureBoot: &no}))
		copyFile(t, bz, pd.paths.Kernel())
		started := time.Now()
		got := bootProbe(t, pd, spec)
		checkProbe(t, got, started)
		if got["EFI"] != "yes" {
			t.Errorf("/sys/firmware/efi missing: the guest did not boot through OVMF")
		}
		if got["SECUREBOOT"] != "Secure boot disabled" {
			t.Errorf("kernel says %q, want Secure boot disabled (efi.secureBoot: false)", got["SECUREBOOT"])
		}
		if _, err := os.Stat(pd.paths.EFIVars()); err != nil {
			t.Errorf("per-VM VARS copy: %v", err)
		}
	})

	t.Run("secureboot", func(t *testing.T) {
		pd := newPod(t)
		spec := prepare(t, pd, guest, domainFieldsVMI(t, &v1.EFI{SecureBoot: &yes}))
		copyFile(t, bz, pd.paths.Kernel())
		_, c := startLauncher(t, pd)
		if _, err := c.Launch(context.Background(), spec); err != nil {
			t.Fatalf("Launch: %v", err)
		}
		waitRunning(t, c)
		con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
		// Either the kernel boots (and must then run in EFI mode with
		// secure boot on) or the firmware refuses it; give it a boot's
		// time.
		deadline := time.Now().Add(2 * bootTimeout)
		for time.Now().Before(deadline) {
			if _, ok := con.find("NODEVIRT-USERDATA-END"); ok {
				efi, _ := con.find("PROBE-EFI=")
				sb, _ := con.find("PROBE-SECUREBOOT=")
				t.Logf("the Debian-signed kernel booted under the secure-boot firmware: %s, %s", efi, sb)
				if efi != "PROBE-EFI=yes" {
					t.Errorf("%s, want yes", efi)
				}
				if sb != "PROBE-SECUREBOOT=Secure boot enabled" {
					t.Errorf("%s, want Secure boot enabled (efi.secureBoot: true)", sb)
				}
				return
			}
			time.Sleep(time.Second)
		}
		st, err := c.Status(context.Background())
		if err != nil || st.State != "running" {
			t.Fatalf("QEMU not running under the secure-boot firmware: %+v, %v", st, err)
		}
		t.Logf("the secure-boot firmware did not start the Debian-signed kernel within %v; console:\n%s", bootTimeout, con.text())
	})
}

// bzImage is the installed Debian kernel the test guest's vmlinux and
// modules come from (it carries the EFI stub).
func bzImage(t *testing.T) string {
	t.Helper()
	m, _ := filepath.Glob("/boot/vmlinuz-*")
	testenv.Require(t, len(m) > 0, "/boot/vmlinuz-* (linux-image-amd64)", "guest-deps")
	return m[len(m)-1]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
