package convert

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

func TestPVCImageSize(t *testing.T) {
	for _, tt := range []struct {
		capacity, want int64
	}{
		{0, 0},
		{-1, 0},
		{1 << 20, 0}, // 0.945 MiB aligns down to nothing
		{1 << 30, 967 << 20},
		{10 << 30, 10 * (1 << 30) * 945 / 1000 / (1 << 20) * (1 << 20)},
		{64 << 20, 60 << 20},
	} {
		if got := PVCImageSize(tt.capacity); got != tt.want {
			t.Errorf("PVCImageSize(%d) = %d, want %d", tt.capacity, got, tt.want)
		}
	}
}

func TestBuild_PVCDiskPreps(t *testing.T) {
	vmi := loadVMI(t, "kernelboot")
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks,
		v1.Disk{Name: "fs", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
		v1.Disk{Name: "fs-ro", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
		v1.Disk{Name: "fs-unknown", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
		v1.Disk{Name: "blk", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
		v1.Disk{Name: "blk-ro", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}})
	for _, v := range []struct {
		name string
		ro   bool
	}{{"fs", false}, {"fs-ro", true}, {"fs-unknown", false}, {"blk", false}, {"blk-ro", true}} {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: v.name,
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + v.name, ReadOnly: v.ro}})
	}
	p := launchspec.DefaultPaths()
	spec, err := Build(Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: p,
		BlockPVCs:     map[string]bool{"blk": true, "blk-ro": true},
		PVCCapacities: map[string]int64{"fs": 1 << 30, "fs-ro": 1 << 30}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := spec.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := []launchspec.DiskPrep{
		{Volume: "fs", Kind: launchspec.PVCFile, Target: p.PVCFile("fs"), Format: "raw", SizeBytes: 967 << 20},
		{Volume: "fs-ro", Kind: launchspec.PVCFile, Target: p.PVCFile("fs-ro"), Format: "raw"},
		{Volume: "fs-unknown", Kind: launchspec.PVCFile, Target: p.PVCFile("fs-unknown"), Format: "raw"},
		{Volume: "blk", Kind: launchspec.PVCBlock, Target: p.PVCBlock("blk"), Format: "raw"},
		{Volume: "blk-ro", Kind: launchspec.PVCBlock, Target: p.PVCBlock("blk-ro"), Format: "raw", ReadOnly: true},
	}
	var got []launchspec.DiskPrep
	for _, d := range spec.Disks {
		if d.Kind == launchspec.PVCFile || d.Kind == launchspec.PVCBlock {
			got = append(got, d)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PVC disk preps (-want +got):\n%s", diff)
	}
}

// TestBuild_SharedPVCCache: a disk on a ReadWriteMany claim (as
// status.volumeStatus records it) defaults to cache none, in file and
// block mode; a disk on a ReadWriteOnce claim keeps QEMU's default, and
// an explicit cache mode wins.
func TestBuild_SharedPVCCache(t *testing.T) {
	vmi := loadVMI(t, "kernelboot")
	claims := []struct {
		volume string
		modes  []corev1.PersistentVolumeAccessMode
		cache  v1.DriverCache
		direct bool
	}{
		{"rwx", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}, "", true},
		{"rwx-blk", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, "", true},
		{"rwx-writethrough", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, v1.CacheWriteThrough, false},
		{"rwo", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, "", false},
		{"unrecorded", nil, "", false},
	}
	for _, c := range claims {
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks,
			v1.Disk{Name: c.volume, Cache: c.cache, Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: c.volume,
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + c.volume}})
		if c.modes != nil {
			vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, v1.VolumeStatus{Name: c.volume,
				PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "claim-" + c.volume, AccessModes: c.modes}})
		}
	}
	spec, err := Build(Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths(),
		BlockPVCs: map[string]bool{"rwx-blk": true}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	nodes := map[string]map[string]any{}
	for i := 1; i < len(spec.Args); i++ {
		if spec.Args[i-1] != "-blockdev" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(spec.Args[i]), &obj); err != nil {
			t.Fatal(err)
		}
		nodes[obj["node-name"].(string)] = obj
	}
	for _, c := range claims {
		var id string
		for _, d := range spec.Devices {
			if d.Name == c.volume {
				id = d.ID
			}
		}
		for _, layer := range []string{id + "-file", id + "-format"} {
			node, ok := nodes[layer]
			if !ok {
				t.Fatalf("%s: no block node %s", c.volume, layer)
			}
			_, direct := node["cache"]
			if direct != c.direct {
				t.Errorf("%s: block node %s has cache %v; want direct %v", c.volume, layer, node["cache"], c.direct)
			}
		}
	}
}
