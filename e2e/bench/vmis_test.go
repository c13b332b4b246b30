package main

import "testing"

func TestTemplatesDecode(t *testing.T) {
	for _, tpl := range []string{bootVMI, pausedVMI, nowhereVMI} {
		vmi, err := newVMI(tpl, "x")
		if err != nil {
			t.Fatal(err)
		}
		if vmi.Name != "x" || len(vmi.Spec.Domain.Devices.Disks) == 0 {
			t.Errorf("decoded %+v", vmi.ObjectMeta)
		}
	}
}
