package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/store"
)

// observe gathers what is known of the VMI uid: the caches, the store, the
// launcher and the in-memory runtime. Every blocking call is bounded.
func (a *Agent) observe(ctx context.Context, uid string) (*Observation, error) {
	o := &Observation{UID: uid, Node: a.cfg.NodeName, VMI: a.vmiOf(uid), Now: a.now()}
	if a.deps.Guard != nil {
		o.Refusing = a.deps.Guard.Refusing()
	}
	rec, err := a.deps.Store.Get(ctx, uid)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		o.Record = &rec
	}
	if o.VMI == nil && o.liveRecord() {
		// Not in the caches: gone, moved off this node, or between the
		// two informers during a migration's handoff (one sees the label
		// go before the other sees it come). Ask the API server before
		// anything is torn down.
		vmi, err := a.liveVMI(ctx, o.Record.Namespace, o.Record.Name, uid)
		if err != nil {
			return nil, err
		}
		o.VMI = vmi
	}
	o.Pod = a.podOf(o)
	awaiting := awaitingLauncher(o)
	if o.VMI == nil && o.Record == nil && !awaiting {
		return o, nil
	}
	if pod, ok := a.podDir(o); ok {
		// Watched before the launcher is asked, so no change after the
		// answer goes unnoticed. A pod without a VMI or live record has
		// nothing left to wake, unless it is a VMI's to prelaunch.
		if o.VMI != nil || o.liveRecord() || awaiting {
			o.PodWatched = a.deps.Pods.Watch(uid, pod.SocketsDir()) == nil
		}
		o.Launcher = a.observeLauncher(ctx, pod)
		if awaiting && o.Launcher.State != LauncherUnreachable {
			// The launcher of a VMI not scheduled yet answers: read the
			// VMI (prelaunch.go).
			if ns, name, ok := vmiRef(o.Pod, uid); ok {
				vmi, err := a.liveVMI(ctx, ns, name, uid)
				if err != nil {
					return nil, err
				}
				o.VMI = vmi
			}
		}
		if o.VMI != nil {
			o.NeedsCloudInit = needsCloudInit(o.VMI, pod)
		}
	}
	if o.liveRecord() {
		o.Runtime = a.runtimeView(uid)
		o.Runtime.QEMUAlive = a.deps.Processes.Alive(o.Record.Process)
	}
	return o, nil
}

// runtimeView is the in-memory view of uid, empty when not attached.
func (a *Agent) runtimeView(uid string) RuntimeView {
	a.mu.Lock()
	d := a.domains[uid]
	a.mu.Unlock()
	if d == nil {
		return RuntimeView{}
	}
	return d.view()
}

// podDir is the launcher pod's directory: the recorded pod first (the one
// QEMU was started in), else the pod from the cache.
func (a *Agent) podDir(o *Observation) (podfs.Pod, bool) {
	podUID := ""
	switch {
	case o.Record != nil && o.Record.PodUID != "":
		podUID = o.Record.PodUID
	case o.Pod != nil:
		podUID = string(o.Pod.UID)
	default:
		return podfs.Pod{}, false
	}
	p, err := podfs.New(a.cfg.KubeletRoot, podUID)
	return p, err == nil
}

// observeLauncher asks the launcher for its status; when it does not
// answer, QEMU's exit file (left in the sockets emptyDir) still tells how
// QEMU ended.
func (a *Agent) observeLauncher(ctx context.Context, pod podfs.Pod) LauncherView {
	cctx, cancel := context.WithTimeout(ctx, min(a.cfg.CallTimeout, launcherStatusTimeout))
	defer cancel()
	st, err := a.deps.Launcher.Status(cctx, pod.Socket(podfs.LauncherSocket))
	if err != nil {
		v := LauncherView{State: LauncherUnreachable}
		if _, err := os.Lstat(pod.Socket(podfs.LauncherSocket)); errors.Is(err, fs.ErrNotExist) {
			v.NoSocket = true
		}
		if e, err := readExit(pod.Socket(podfs.ExitFile)); err == nil {
			v.Exit = &e
		}
		return v
	}
	v := LauncherView{State: st.State, SpecHash: st.SpecHash, Exit: st.Exit, Error: st.Error}
	if st.State == launcher.StateExited && st.Exit == nil {
		// QEMU never started (disk preparation or exec failed).
		v.Exit = &launcher.Exit{Code: -1, Reason: st.Error}
	}
	return v
}

func readExit(path string) (launcher.Exit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return launcher.Exit{}, err
	}
	var e launcher.Exit
	if err := json.Unmarshal(b, &e); err != nil {
		return launcher.Exit{}, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// liveVMI reads the VMI ns/name with the given UID from the API server;
// nil when it is gone, labelled for neither this node nor a migration to
// it, or, unlabelled, past the phases before Scheduled and not taken over
// by this node (a VMI the controller failed before any agent took it
// over). An unlabelled VMI before Scheduled is one plan may prelaunch, one
// with this node in status.nodeName one this agent took over
// (prelaunch.go).
//
// A prelaunching or taken-over VMI is read on every sync until the
// controller labels it (the informers see only labelled VMIs), so the
// read is served from the API server's watch cache, which costs it no etcd read and no decoding;
// only an answer that would let the agent drop the VMI is read again from
// etcd, as the watch cache may lag behind a VMI's creation or label.
func (a *Agent) liveVMI(ctx context.Context, ns, name, uid string) (*v1.VirtualMachineInstance, error) {
	if name == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	for _, rv := range []string{"0", ""} {
		vmi, err := a.deps.Virt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{ResourceVersion: rv})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get VMI %s/%s: %w", ns, name, err)
		case a.ownsLive(vmi, uid):
			return vmi, nil
		}
	}
	return nil, nil
}

// ownsLive reports whether vmi is the one with uid, and this node's to run
// (liveVMI).
func (a *Agent) ownsLive(vmi *v1.VirtualMachineInstance, uid string) bool {
	switch {
	case string(vmi.UID) != uid:
		return false
	case vmi.Labels[v1.NodeNameLabel] == a.cfg.NodeName, vmi.Labels[v1.MigrationTargetNodeNameLabel] == a.cfg.NodeName,
		takenOver(vmi, a.cfg.NodeName):
		return true
	}
	return vmi.Unlabelled() && !vmi.Status.Phase.OwnedByAgent() && !vmi.Status.Phase.IsFinal()
}
