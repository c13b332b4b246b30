package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/store"
)

// observe gathers what is known of the VMI uid: the caches, the store, the
// launcher and the in-memory runtime. Every blocking call is bounded.
func (a *Agent) observe(ctx context.Context, uid string) (*Observation, error) {
	o := &Observation{UID: uid, VMI: a.vmiOf(uid), Pod: a.podOf(uid), Now: a.now()}
	rec, err := a.deps.Store.Get(ctx, uid)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		o.Record = &rec
	}
	if o.VMI == nil && o.Record == nil {
		return o, nil
	}
	if pod, ok := a.podDir(o); ok {
		o.Launcher = a.observeLauncher(ctx, pod)
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
