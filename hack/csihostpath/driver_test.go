package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// clients of one driver process's socket.
type clients struct {
	id   csi.IdentityClient
	ctl  csi.ControllerClient
	node csi.NodeClient
}

// startDriver serves the driver for node on a socket in dir with state in
// root, as the DaemonSet does, and returns its clients.
func startDriver(t *testing.T, dir, root, node string, registration bool) clients {
	t.Helper()
	sock := filepath.Join(dir, node+".sock")
	c := config{name: "hostpath.csi.test", endpoint: "unix://" + sock, root: root, nodeID: node, controller: true, node: true}
	if registration {
		c.registrationDir, c.kubeletEndpoint = filepath.Join(dir, "plugins_registry"), "/var/lib/kubelet/plugins/x/csi.sock"
	}
	srv, err := serve(c, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return clients{csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)}
}

func capability(block bool, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}
	}
	return c
}

func code(err error) codes.Code { return status.Code(err) }

// TestDriver_Integration drives the driver as the kubelet and the CSI
// sidecars do, with real bind mounts and loop devices: two node plugins
// sharing one state directory (the local cluster's nodes share a host).
func TestDriver_Integration(t *testing.T) {
	_, err := os.Stat("/dev/loop-control")
	testenv.Require(t, os.Geteuid() == 0 && err == nil, "root and /dev/loop-control (bind mounts, loop devices)", "test-csi")
	ctx := t.Context()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	a := startDriver(t, dir, root, "node-a", true)
	b := startDriver(t, dir, root, "node-b", false)
	rwx := csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	publish := func(t *testing.T, c clients, id, target string, block, ro bool) {
		t.Helper()
		_, err := c.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target,
			VolumeCapability: capability(block, rwx), Readonly: ro})
		if err != nil {
			t.Fatalf("publish %s at %s: %v", id, target, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) }) // only if the test failed first
	}
	unpublish := func(t *testing.T, c clients, id, target string) {
		t.Helper()
		for range 2 { // idempotent
			if _, err := c.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
				t.Fatalf("unpublish %s at %s: %v", id, target, err)
			}
		}
		if m, _ := isMountPoint(target); m {
			t.Errorf("%s is still a mount point", target)
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left: %v", target, err)
		}
	}

	info, err := a.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.Name != "hostpath.csi.test" {
		t.Fatalf("GetPluginInfo: %v %v", info, err)
	}
	reg, err := grpc.NewClient("unix://"+filepath.Join(dir, "plugins_registry", registrationSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	pi, err := registerapi.NewRegistrationClient(reg).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || pi.Type != registerapi.CSIPlugin || pi.Endpoint != "/var/lib/kubelet/plugins/x/csi.sock" {
		t.Errorf("registration GetInfo: %v %v", pi, err)
	}

	create := func(t *testing.T, name string, bytes int64, block bool, src *csi.VolumeContentSource) *csi.Volume {
		t.Helper()
		resp, err := a.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
			VolumeCapabilities: []*csi.VolumeCapability{capability(block, rwx)}, VolumeContentSource: src})
		if err != nil {
			t.Fatalf("CreateVolume %s: %v", name, err)
		}
		return resp.Volume
	}

	t.Run("FilesystemRWX", func(t *testing.T) {
		v := create(t, "pvc-fs", 64<<20, false, nil)
		if again := create(t, "pvc-fs", 64<<20, false, nil); again.VolumeId != v.VolumeId {
			t.Errorf("CreateVolume is not idempotent: %s then %s", v.VolumeId, again.VolumeId)
		}
		_, err := a.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-fs", CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{capability(false, rwx)}})
		if code(err) != codes.AlreadyExists {
			t.Errorf("the same name, another size: %v, want AlreadyExists", err)
		}
		ta, tb := filepath.Join(dir, "a", "mount"), filepath.Join(dir, "b", "mount")
		publish(t, a, v.VolumeId, ta, false, false)
		publish(t, a, v.VolumeId, ta, false, false) // idempotent
		publish(t, b, v.VolumeId, tb, false, false)
		if err := os.WriteFile(filepath.Join(ta, "hello"), []byte("from node-a"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(tb, "hello")); err != nil || string(got) != "from node-a" {
			t.Errorf("node-b reads %q, %v", got, err)
		}
		unpublish(t, b, v.VolumeId, tb)
		unpublish(t, a, v.VolumeId, ta)

		ro := filepath.Join(dir, "ro", "mount")
		publish(t, b, v.VolumeId, ro, false, true)
		if err := os.WriteFile(filepath.Join(ro, "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
			t.Errorf("write on a read-only publish: %v, want EROFS", err)
		}
		if got, _ := os.ReadFile(filepath.Join(ro, "hello")); string(got) != "from node-a" {
			t.Errorf("read-only publish reads %q", got)
		}
		unpublish(t, b, v.VolumeId, ro)

		// Snapshot, change, restore into a new volume.
		sn, err := a.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-fs", SourceVolumeId: v.VolumeId})
		if err != nil || !sn.Snapshot.ReadyToUse {
			t.Fatalf("CreateSnapshot: %v %v", sn, err)
		}
		publish(t, a, v.VolumeId, ta, false, false)
		if err := os.WriteFile(filepath.Join(ta, "hello"), []byte("changed"), 0o644); err != nil {
			t.Fatal(err)
		}
		unpublish(t, a, v.VolumeId, ta)
		restored := create(t, "pvc-fs-restored", 64<<20, false, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: sn.Snapshot.SnapshotId}}})
		publish(t, b, restored.VolumeId, tb, false, false)
		if got, err := os.ReadFile(filepath.Join(tb, "hello")); err != nil || string(got) != "from node-a" {
			t.Errorf("restored volume reads %q, %v; want the snapshot's content", got, err)
		}
		unpublish(t, b, restored.VolumeId, tb)
	})

	t.Run("BlockSnapshotRestore", func(t *testing.T) {
		v := create(t, "pvc-blk", 16<<20, true, nil)
		target := filepath.Join(dir, "blk", "dev")
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		pattern := bytes.Repeat([]byte("nodevirt"), 512)
		writeAt := func(data []byte) {
			t.Helper()
			publish(t, a, v.VolumeId, target, true, false)
			f, err := os.OpenFile(target, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(data, 1<<20)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			var rec published
			if err := readJSON((&node{id: "node-a", st: store{root: root}}).recordPath(target), &rec); err != nil || !strings.HasPrefix(rec.Loop, "/dev/loop") {
				t.Fatalf("publish record: %+v %v", rec, err)
			}
			unpublish(t, a, v.VolumeId, target)
			if bf, err := os.ReadFile("/sys/block/" + filepath.Base(rec.Loop) + "/loop/backing_file"); err == nil {
				t.Errorf("%s still backs %s after unpublish", rec.Loop, strings.TrimSpace(string(bf)))
			}
		}
		writeAt(pattern)
		sn, err := a.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-blk", SourceVolumeId: v.VolumeId})
		if err != nil {
			t.Fatal(err)
		}
		writeAt(bytes.Repeat([]byte("X"), len(pattern)))
		restored := create(t, "pvc-blk-restored", 32<<20, true, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: sn.Snapshot.SnapshotId}}})
		disk := filepath.Join(root, "volumes", restored.VolumeId, diskFile)
		f, err := os.Open(disk)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make([]byte, len(pattern))
		if _, err := f.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, pattern) {
			t.Errorf("restored disk at 1 MiB: %q..., %v; want the snapshot's pattern", got[:16], err)
		}
		var st unix.Stat_t
		if err := unix.Stat(disk, &st); err != nil {
			t.Fatal(err)
		}
		if fi, _ := f.Stat(); fi.Size() != 32<<20 || st.Blocks*512 > 1<<20 {
			t.Errorf("restored disk: %d bytes, %d allocated; want 32 MiB, sparse", fi.Size(), st.Blocks*512)
		}

		entries, err := a.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: v.VolumeId})
		if err != nil || len(entries.Entries) != 1 || entries.Entries[0].Snapshot.SnapshotId != sn.Snapshot.SnapshotId {
			t.Errorf("ListSnapshots of the volume: %v %v", entries, err)
		}
		for range 2 {
			if _, err := a.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: sn.Snapshot.SnapshotId}); err != nil {
				t.Errorf("DeleteSnapshot: %v", err)
			}
			if _, err := a.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.VolumeId}); err != nil {
				t.Errorf("DeleteVolume: %v", err)
			}
		}
		if _, err := os.Stat(filepath.Join(root, "volumes", v.VolumeId)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("deleted volume's directory: %v", err)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		_, err := a.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "from-nothing",
			VolumeCapabilities: []*csi.VolumeCapability{capability(false, rwx)},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
				Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-missing"}}}})
		if code(err) != codes.NotFound {
			t.Errorf("from a missing snapshot: %v, want NotFound", err)
		}
		if _, err := a.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "no-caps"}); code(err) != codes.InvalidArgument {
			t.Errorf("no capabilities: %v, want InvalidArgument", err)
		}
		refusing, err := a.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-refusing", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{capability(false, rwx)}, Parameters: map[string]string{ParamRefuseSnapshots: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-refused", SourceVolumeId: refusing.Volume.VolumeId}); code(err) != codes.FailedPrecondition {
			t.Errorf("a snapshot of a volume of a refuseSnapshots class: %v, want FailedPrecondition", err)
		}
		v := create(t, "pvc-mode", 1<<20, false, nil)
		_, err = a.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.VolumeId, TargetPath: filepath.Join(dir, "mode"),
			VolumeCapability: capability(true, rwx)})
		if code(err) != codes.InvalidArgument {
			t.Errorf("a Filesystem volume published as Block: %v, want InvalidArgument", err)
		}
	})
}

// A socket path the kernel would refuse with a bare EINVAL is refused with
// its length; the longest that fits is served.
func TestListen_SocketPathLength(t *testing.T) {
	dir := t.TempDir()
	fits := filepath.Join(dir, strings.Repeat("s", maxSocketPath-len(dir)-1))
	l, err := listen(fits)
	if err != nil {
		t.Fatalf("listen at %d bytes: %v", len(fits), err)
	}
	l.Close()
	_, err = listen(fits + "x")
	if err == nil || !strings.Contains(err.Error(), "108 bytes") {
		t.Errorf("listen at 108 bytes: %v, want an error naming the length", err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\09`: `/bad\09`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// The node namespace path: a thread that entered the parent's mount
// namespace (here the test runner's, the host's) sees its mounts.
func TestMountNS_Parent(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (setns)", "test-csi")
	ns, err := openParentMountNS()
	if err != nil {
		t.Fatal(err)
	}
	var root bool
	if err := ns.do(func() error {
		var err error
		root, err = isMountPoint("/")
		return err
	}); err != nil || !root {
		t.Errorf("in the parent's namespace, / is a mount point: %v, %v", root, err)
	}
}
