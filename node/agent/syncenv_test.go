package agent_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	virtfake "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/agent/agenttest"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/store"
)

// The sync tests' VMI, pod and processes.
const (
	syncNode    = "node1"
	syncNS      = "ns"
	syncVMI     = "vm"
	syncUID     = "9f0c1d2e-3b4a-4c5d-8e6f-7a8b9c0d1e2f"
	syncPodUID  = "pod-1"
	launcherPID = 4242
	qemuPID     = 5151
	qemuStart   = 777
)

// syncTap and syncBridge are the links of the VMI's one (masquerade)
// interface.
var (
	syncTap    = netsetup.LinkName("nvtap", "default")
	syncBridge = netsetup.LinkName("nvbr", "default")
)

// syncEnv is an agent on fake clientsets, a real store in a temp dir and
// the agenttest fakes, all sharing one effect log.
type syncEnv struct {
	t        *testing.T
	a        *agent.Agent
	virt     *virtfake.Clientset
	kube     *kubefake.Clientset
	db       *store.DB
	log      *agenttest.Log
	launcher *agenttest.Launcher
	net      *agenttest.Network
	qemu     *agenttest.QEMU
	procs    *agenttest.Processes

	mu  sync.Mutex
	now time.Time
}

func newSyncEnv(t *testing.T) *syncEnv {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "agent.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := agenttest.NewLog()
	e := &syncEnv{
		t: t, db: db, log: log,
		virt:     virtfake.NewSimpleClientset(syncVMIObject()),
		kube:     kubefake.NewSimpleClientset(syncPodObject()),
		launcher: agenttest.NewLauncher(log, launcherPID),
		net:      agenttest.NewNetwork(log),
		qemu:     agenttest.NewQEMU(log, qemuPID),
		procs:    agenttest.NewProcesses(log),
		now:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	e.procs.Start(launcherPID, 1)
	e.newAgent()
	return e
}

// newAgent starts e's agent on e's store and fakes: at first, and as the
// process after a restart (the previous one's connections closed).
func (e *syncEnv) newAgent() {
	t := e.t
	t.Helper()
	if e.a != nil {
		e.a.CloseForTest()
	}
	cfg := agent.DefaultConfig()
	cfg.NodeName = syncNode
	cfg.KubeletRoot = t.TempDir()
	cfg.AllowEmulation = true
	cfg.CallTimeout = time.Second
	a, err := agent.New(cfg, agent.Deps{
		Kube: e.kube, Virt: e.virt, Store: e.db,
		Launcher: e.launcher, Network: e.net, QEMU: e.qemu, Processes: e.procs,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.SetClockForTest(e.clock)
	t.Cleanup(a.CloseForTest)
	e.a = a
	e.refresh()
}

func (e *syncEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// advance moves the agent's clock.
func (e *syncEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// refresh copies the API objects into the informer caches.
func (e *syncEnv) refresh() {
	e.t.Helper()
	ctx := context.Background()
	var objs []runtime.Object
	vmis, err := e.virt.KubevirtV1().VirtualMachineInstances(syncNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range vmis.Items {
		objs = append(objs, &vmis.Items[i])
	}
	pods, err := e.kube.CoreV1().Pods(syncNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	if err := e.a.SetCacheForTest(objs...); err != nil {
		e.t.Fatal(err)
	}
}

// sync runs one sync, then refreshes the caches.
func (e *syncEnv) sync() error {
	e.t.Helper()
	err := e.a.SyncForTest(context.Background(), syncUID)
	e.refresh()
	return err
}

// mustSync runs one sync that must succeed.
func (e *syncEnv) mustSync() {
	e.t.Helper()
	if err := e.sync(); err != nil {
		e.t.Fatalf("sync: %v", err)
	}
}

// record returns the VMI's record.
func (e *syncEnv) record() store.Record {
	e.t.Helper()
	r, err := e.db.Get(context.Background(), syncUID)
	if err != nil {
		e.t.Fatalf("record: %v", err)
	}
	return r
}

// vmi returns the VMI from the API.
func (e *syncEnv) vmi() *v1.VirtualMachineInstance {
	e.t.Helper()
	v, err := e.virt.KubevirtV1().VirtualMachineInstances(syncNS).Get(context.Background(), syncVMI, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("VMI: %v", err)
	}
	return v
}

// timeline returns the reasons of the record's timeline.
func (e *syncEnv) timeline() []string {
	e.t.Helper()
	tl, err := e.db.Timeline(context.Background(), syncUID)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range tl {
		out = append(out, ev.Reason)
	}
	return out
}

// qemuStarts makes QEMU run, as the launcher would after Launch.
func (e *syncEnv) qemuStarts() {
	e.qemu.Listen("running")
	e.procs.Start(qemuPID, qemuStart)
}

// qemuExits makes QEMU gone and its launcher report exit.
func (e *syncEnv) qemuExits(exit launcher.Exit) {
	e.qemu.Exit()
	e.procs.Exit(qemuPID)
	e.launcher.Set(launcher.Status{State: launcher.StateExited, Exit: &exit})
}

// start brings the VMI to Running: create, launch, attach.
func (e *syncEnv) start() {
	e.t.Helper()
	e.mustSync()
	e.qemuStarts()
	e.mustSync()
	if p := e.vmi().Status.Phase; p != v1.Running {
		e.t.Fatalf("VMI phase after start = %q, want Running", p)
	}
	e.log.Reset()
	e.virt.ClearActions()
}

// update writes vmi to the fake API server and the caches.
func (e *syncEnv) update(vmi *v1.VirtualMachineInstance) {
	e.t.Helper()
	if err := e.virt.Tracker().Update(v1.SchemeGroupVersion.WithResource("virtualmachineinstances"), vmi, syncNS); err != nil {
		e.t.Fatal(err)
	}
	e.refresh()
}

// deleteVMI marks the VMI deleted (it keeps its finalizer).
func (e *syncEnv) deleteVMI() {
	e.t.Helper()
	v := e.vmi()
	ts := metav1.NewTime(e.clock())
	v.DeletionTimestamp = &ts
	e.update(v)
}

// apiActions are the virt clientset's write actions, as "verb[/subresource]".
func (e *syncEnv) apiActions() []string {
	var out []string
	for _, a := range e.virt.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		s := a.GetVerb()
		if sub := a.GetSubresource(); sub != "" {
			s += "/" + sub
		}
		out = append(out, s)
	}
	return out
}

// failStatusPatch makes status patches fail with err; apply says whether
// the API server applies the patch anyway (an answer lost on the way).
func (e *syncEnv) failStatusPatch(times int, apply bool, err error) {
	n := 0
	e.virt.PrependReactor("patch", "virtualmachineinstances", func(act clienttesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "status" || n >= times {
			return false, nil, nil
		}
		n++
		if apply {
			if _, _, perr := clienttesting.ObjectReaction(e.virt.Tracker())(act); perr != nil {
				return true, nil, perr
			}
		}
		return true, nil, err
	})
}

func syncVMIObject() *v1.VirtualMachineInstance {
	grace := int64(5)
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: syncVMI, Namespace: syncNS, UID: syncUID, ResourceVersion: "1",
			Labels:     map[string]string{v1.NodeNameLabel: syncNode},
			Finalizers: []string{v1.VirtualMachineInstanceFinalizer},
		},
		Spec: v1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: &grace,
			Domain: v1.DomainSpec{
				Memory: &v1.Memory{Guest: ptr(resource.MustParse("128Mi"))},
				Devices: v1.Devices{
					Disks:      []v1.Disk{{Name: "root", Disk: &v1.DiskTarget{}}},
					Interfaces: []v1.Interface{{Name: "default", Masquerade: &v1.InterfaceMasquerade{}}},
				},
			},
			Networks: []v1.Network{{Name: "default", Pod: &v1.PodNetwork{}}},
			Volumes: []v1.Volume{{Name: "root",
				ContainerDisk: &v1.ContainerDiskSource{Image: "guest:latest", Path: "/disk/disk.qcow2"},
			}},
		},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: syncNode},
	}
}

func syncPodObject() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "virt-launcher-vm", Namespace: syncNS, UID: syncPodUID,
			Labels: map[string]string{v1.AppLabel: v1.LauncherAppValue, v1.CreatedByLabel: syncUID},
		},
		Spec:   corev1.PodSpec{NodeName: syncNode},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func ptr[T any](v T) *T { return &v }
