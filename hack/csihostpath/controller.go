package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// defaultCapacity is a volume's size when the request names none.
const defaultCapacity = 1 << 30

// controller is the CSI Controller service. One mutex serializes the
// calls: the sidecars retry, and a create racing a delete of the same
// volume must not interleave.
type controller struct {
	csi.UnimplementedControllerServer
	st  store
	log *slog.Logger

	mu sync.Mutex
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// blockOf says whether caps ask for Block mode; mixing modes is an error.
func blockOf(caps []*csi.VolumeCapability) (bool, error) {
	if len(caps) == 0 {
		return false, status.Error(codes.InvalidArgument, "volume_capabilities: none given")
	}
	block, mount := false, false
	for _, c := range caps {
		switch {
		case c.GetBlock() != nil:
			block = true
		case c.GetMount() != nil:
			mount = true
		default:
			return false, status.Error(codes.InvalidArgument, "volume_capabilities: neither block nor mount")
		}
		if c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
			return false, status.Error(codes.InvalidArgument, "volume_capabilities: access_mode unset")
		}
	}
	if block && mount {
		return false, status.Error(codes.InvalidArgument, "volume_capabilities: both block and mount")
	}
	return block, nil
}

func (c *controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: empty")
	}
	block, err := blockOf(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	capacity := req.GetCapacityRange().GetRequiredBytes()
	if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && capacity > limit {
		return nil, status.Errorf(codes.InvalidArgument, "capacity_range: required %d > limit %d", capacity, limit)
	}
	if capacity == 0 {
		capacity = defaultCapacity
		if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && limit < capacity {
			capacity = limit
		}
	}
	v := volume{ID: idOf("vol", req.GetName()), Name: req.GetName(), Capacity: capacity, Block: block,
		RefuseSnapshots: req.GetParameters()[ParamRefuseSnapshots] == "true"}

	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, err := c.st.volume(v.ID); err == nil {
		if cur.Capacity != v.Capacity || cur.Block != v.Block {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with %d bytes, block %t", req.GetName(), cur.Capacity, cur.Block)
		}
		return &csi.CreateVolumeResponse{Volume: csiVolume(cur, req.GetVolumeContentSource())}, nil
	} else if !errors.Is(err, errNotFound) {
		return nil, status.Error(codes.Internal, err.Error())
	}

	var fill func(dst string) error
	switch src := req.GetVolumeContentSource(); {
	case src.GetSnapshot() != nil:
		sn, err := c.st.snapshot(src.GetSnapshot().GetSnapshotId())
		if errors.Is(err, errNotFound) {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: snapshot %s not found", src.GetSnapshot().GetSnapshotId())
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := compatible(sn.Block, sn.Size, v); err != nil {
			return nil, err
		}
		v.Source = "snapshot:" + sn.ID
		fill = func(dst string) error { return copyData(dataPath(c.st.snapshotDir(sn.ID), sn.Block), dst, sn.Block) }
	case src.GetVolume() != nil:
		from, err := c.st.volume(src.GetVolume().GetVolumeId())
		if errors.Is(err, errNotFound) {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: volume %s not found", src.GetVolume().GetVolumeId())
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := compatible(from.Block, from.Capacity, v); err != nil {
			return nil, err
		}
		v.Source = "volume:" + from.ID
		fill = func(dst string) error {
			return copyData(dataPath(c.st.volumeDir(from.ID), from.Block), dst, from.Block)
		}
	}
	start := time.Now()
	if err := c.st.createVolume(v, fill); err != nil {
		return nil, status.Errorf(codes.Internal, "create volume %s: %v", v.ID, err)
	}
	c.log.Info("volume created", "id", v.ID, "name", v.Name, "bytes", v.Capacity, "block", v.Block, "source", v.Source, "took", time.Since(start))
	return &csi.CreateVolumeResponse{Volume: csiVolume(v, req.GetVolumeContentSource())}, nil
}

// compatible checks that content of a mode and size fits volume v.
func compatible(block bool, size int64, v volume) error {
	if block != v.Block {
		return status.Errorf(codes.InvalidArgument, "volume_content_source: block %t, the volume asks for block %t", block, v.Block)
	}
	if size > v.Capacity {
		return status.Errorf(codes.OutOfRange, "volume_content_source: %d bytes do not fit in %d", size, v.Capacity)
	}
	return nil
}

func csiVolume(v volume, src *csi.VolumeContentSource) *csi.Volume {
	return &csi.Volume{VolumeId: v.ID, CapacityBytes: v.Capacity, ContentSource: src,
		VolumeContext: map[string]string{"block": strconv.FormatBool(v.Block)}}
}

func (c *controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := remove(c.st.volumeDir(req.GetVolumeId()), volumeMeta); err != nil {
		return nil, status.Errorf(codes.Internal, "delete volume %s: %v", req.GetVolumeId(), err)
	}
	c.log.Info("volume deleted", "id", req.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}

func (c *controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	v, err := c.st.volume(req.GetVolumeId())
	if errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	block, err := blockOf(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	if block != v.Block {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("volume %s is block %t", v.ID, v.Block)}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

// ParamRefuseSnapshots is the StorageClass parameter whose value "true"
// makes the volumes of the class refuse every snapshot (for tests of a
// failed CSI snapshot).
const ParamRefuseSnapshots = "refuseSnapshots"

func (c *controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: empty")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id: empty")
	}
	id := idOf("snap", req.GetName())
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, err := c.st.snapshot(id); err == nil {
		if cur.VolumeID != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists of volume %s", req.GetName(), cur.VolumeID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(cur)}, nil
	} else if !errors.Is(err, errNotFound) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	v, err := c.st.volume(req.GetSourceVolumeId())
	if errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "source_volume_id: volume %s not found", req.GetSourceVolumeId())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if v.RefuseSnapshots {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s refuses snapshots (StorageClass parameter %s)", v.ID, ParamRefuseSnapshots)
	}
	sn := snapshot{ID: id, Name: req.GetName(), VolumeID: v.ID, Size: v.Capacity, Block: v.Block, Created: time.Now().UTC()}
	start := time.Now()
	if err := c.st.createSnapshot(sn); err != nil {
		return nil, status.Errorf(codes.Internal, "create snapshot %s: %v", id, err)
	}
	c.log.Info("snapshot created", "id", sn.ID, "name", sn.Name, "volume", v.ID, "took", time.Since(start))
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(sn)}, nil
}

func csiSnapshot(sn snapshot) *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: sn.ID, SourceVolumeId: sn.VolumeID, SizeBytes: sn.Size,
		CreationTime: timestamppb.New(sn.Created), ReadyToUse: true}
}

func (c *controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id: empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := remove(c.st.snapshotDir(req.GetSnapshotId()), snapshotMeta); err != nil {
		return nil, status.Errorf(codes.Internal, "delete snapshot %s: %v", req.GetSnapshotId(), err)
	}
	c.log.Info("snapshot deleted", "id", req.GetSnapshotId())
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists every snapshot, or the one named, or a volume's;
// no paging (max_entries and starting_token are not honoured beyond a
// first page of everything).
func (c *controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	all, err := c.st.snapshots()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	var out []*csi.ListSnapshotsResponse_Entry
	for _, sn := range all {
		if id := req.GetSnapshotId(); id != "" && sn.ID != id {
			continue
		}
		if vid := req.GetSourceVolumeId(); vid != "" && sn.VolumeID != vid {
			continue
		}
		out = append(out, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(sn)})
	}
	return &csi.ListSnapshotsResponse{Entries: out}, nil
}
