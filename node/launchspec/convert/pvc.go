package convert

import (
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// FilesystemOverhead is the share of a filesystem-mode PVC's capacity kept
// free of its disk.img for the filesystem's own metadata: KubeVirt's (and
// CDI's) default global filesystem overhead, 5.5 %.
const FilesystemOverhead = 0.055

// pvcAlign is the alignment of a created disk.img's size (KubeVirt's).
const pvcAlign = 1 << 20

// PVCImageSize is the size of the disk.img created on a filesystem-mode
// PVC of capacity bytes: the capacity less FilesystemOverhead, aligned down
// to 1 MiB. It is 0 when nothing is left.
func PVCImageSize(capacity int64) int64 {
	if capacity <= 0 {
		return 0
	}
	usable := int64((1 - FilesystemOverhead) * float64(capacity))
	return usable / pvcAlign * pvcAlign
}

// pvcSource resolves a PVC volume and queues its preparation: the block
// device's check, or disk.img's creation when absent (never on a read-only
// volume, nor without a known capacity).
func (b *builder) pvcSource(volume string, readOnly bool) diskSource {
	p := b.in.Paths
	shared := sharedClaim(b.vmi, volume)
	if b.in.BlockPVCs[volume] {
		b.prep = append(b.prep, launchspec.DiskPrep{
			Volume: volume, Kind: launchspec.PVCBlock, Target: p.PVCBlock(volume), Format: "raw", ReadOnly: readOnly,
		})
		return diskSource{path: p.PVCBlock(volume), driver: "host_device", format: "raw", readOnly: readOnly, shared: shared}
	}
	var size int64
	if !readOnly {
		size = PVCImageSize(b.in.PVCCapacities[volume])
	}
	b.prep = append(b.prep, launchspec.DiskPrep{
		Volume: volume, Kind: launchspec.PVCFile, Target: p.PVCFile(volume), Format: "raw", SizeBytes: size,
	})
	return diskSource{path: p.PVCFile(volume), driver: "file", format: "raw", readOnly: readOnly, shared: shared}
}

// sharedClaim reports whether the claim of vmi's PVC volume is
// ReadWriteMany, as the controller recorded it in status.volumeStatus.
func sharedClaim(vmi *v1.VirtualMachineInstance, volume string) bool {
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == volume {
			return s.PersistentVolumeClaimInfo.Shared()
		}
	}
	return false
}
