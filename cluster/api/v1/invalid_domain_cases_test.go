package v1_test

// domainInvalidCases break vmi-domain-fields.yaml: the features, clock,
// firmware and device fields of issue 19 that nodevirt refuses or bounds.
func domainInvalidCases() []invalidCase {
	dom := []any{"spec", "domain"}
	at := func(p ...any) []any { return append(append([]any{}, dom...), p...) }
	return []invalidCase{
		{
			name: "secureboot-smm-disabled", file: domainFile,
			mutate: func(o map[string]any) { set(o, false, at("features", "smm", "enabled")...) },
			field:  "spec.domain.features.smm", detail: "EFI secure boot",
		},
		{
			name: "secureboot-default-without-smm", file: domainFile,
			mutate: func(o map[string]any) {
				del(o, at("features", "smm")...)
				del(o, at("firmware", "bootloader", "efi", "secureBoot")...)
			},
			field: "spec.domain.features.smm", detail: "requires SMM",
		},
		{
			name: "vm-secureboot-smm-disabled", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, map[string]any{"efi": map[string]any{}}, append(tmpl, "domain", "firmware", "bootloader")...)
				set(o, map[string]any{"enabled": false}, append(tmpl, "domain", "features", "smm")...)
			},
			field: "spec.template.spec.domain.features.smm", detail: "EFI secure boot",
		},
		{
			name: "efi-persistent", file: domainFile,
			mutate: func(o map[string]any) { set(o, true, at("firmware", "bootloader", "efi", "persistent")...) },
			field:  "spec.domain.firmware.bootloader.efi.persistent", detail: "not supported",
		},
		{
			name: "bios-and-efi", file: domainFile,
			mutate: func(o map[string]any) { set(o, map[string]any{}, at("firmware", "bootloader", "bios")...) },
			field:  "spec.domain.firmware.bootloader", detail: "at most one of bios and efi",
		},
		{
			name: "tpm-persistent", file: domainFile,
			mutate: func(o map[string]any) { set(o, map[string]any{"persistent": true}, at("devices", "tpm")...) },
			field:  "spec.domain.devices.tpm.persistent", detail: "persistent vTPM",
		},
		{
			name: "utc-and-timezone", file: domainFile,
			mutate: func(o map[string]any) { set(o, "Europe/Paris", at("clock", "timezone")...) },
			field:  "spec.domain.clock", detail: "at most one of utc and timezone",
		},
		{
			name: "timezone-injection", file: domainFile,
			mutate: func(o map[string]any) {
				del(o, at("clock", "utc")...)
				set(o, "Europe/Paris,clock=vm", at("clock", "timezone")...)
			},
			field: "spec.domain.clock.timezone", detail: "should match",
		},
		{
			name: "timezone-path", file: domainFile,
			mutate: func(o map[string]any) {
				del(o, at("clock", "utc")...)
				set(o, "../../etc/passwd", at("clock", "timezone")...)
			},
			field: "spec.domain.clock.timezone", detail: "should match",
		},
		{
			name: "rtc-tick-policy", file: domainFile,
			mutate: func(o map[string]any) { set(o, "merge", at("clock", "timer", "rtc", "tickPolicy")...) },
			field:  "spec.domain.clock.timer.rtc.tickPolicy", detail: "Unsupported value",
		},
		{
			name: "spinlocks-below-4096", file: domainFile,
			mutate: func(o map[string]any) { set(o, 100, at("features", "hyperv", "spinlocks", "spinlocks")...) },
			field:  "spec.domain.features.hyperv.spinlocks.spinlocks", detail: "greater than or equal to 4096",
		},
		{
			name: "vendorid-too-long", file: domainFile,
			mutate: func(o map[string]any) {
				set(o, "thirteen-char", at("features", "hyperv", "vendorid", "vendorid")...)
			},
			field: "spec.domain.features.hyperv.vendorid.vendorid", detail: "may not be more than 12",
		},
		{
			name: "firmware-uuid", file: domainFile,
			mutate: func(o map[string]any) { set(o, "not-a-uuid", at("firmware", "uuid")...) },
			field:  "spec.domain.firmware.uuid", detail: "should match",
		},
		{
			name: "firmware-serial-control", file: domainFile,
			mutate: func(o map[string]any) { set(o, "a\nb", at("firmware", "serial")...) },
			field:  "spec.domain.firmware.serial", detail: "should match",
		},
		{
			name: "watchdog-action", file: domainFile,
			mutate: func(o map[string]any) { set(o, "pause", at("devices", "watchdog", "i6300esb", "action")...) },
			field:  "spec.domain.devices.watchdog.i6300esb.action", detail: "Unsupported value",
		},
		{
			name: "watchdog-no-model", file: domainFile,
			mutate: func(o map[string]any) { del(o, at("devices", "watchdog", "i6300esb")...) },
			field:  "spec.domain.devices.watchdog", detail: "i6300esb must be set",
		},
		{
			name: "input-keyboard", file: domainFile,
			mutate: func(o map[string]any) { set(o, "keyboard", at("devices", "inputs", 0, "type")...) },
			field:  "spec.domain.devices.inputs[0].type", detail: "Unsupported value",
		},
		{
			name: "io-native-without-cache-none", file: domainFile,
			mutate: func(o map[string]any) { set(o, "writeback", at("devices", "disks", 0, "cache")...) },
			field:  "spec.domain.devices.disks[0].io", detail: "io native needs cache none",
		},
		{
			name: "dedicated-iothread-on-sata", file: domainFile,
			mutate: func(o map[string]any) {
				set(o, "sata", at("devices", "disks", 1, "disk", "bus")...)
				set(o, true, at("devices", "disks", 1, "dedicatedIOThread")...)
			},
			field: "spec.domain.devices.disks[1].dedicatedIOThread", detail: "needs bus virtio",
		},
		{
			name: "hyperv-synic-without-vpindex", file: domainFile,
			mutate: func(o map[string]any) { del(o, at("features", "hyperv", "vpindex")...) },
			field:  "spec.domain.features.hyperv", detail: "vpindex",
		},
		{
			name: "priority-class-name", file: domainFile,
			mutate: func(o map[string]any) { set(o, "Not_Valid", "spec", "priorityClassName") },
			field:  "spec.priorityClassName", detail: "should match",
		},
	}
}
