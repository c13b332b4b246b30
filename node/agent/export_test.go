package agent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Test-only access for the external tests of sync (sync_test.go).

// PreattachForTest attaches to the QEMUs of the live records, as Run does
// while its informers list.
func (a *Agent) PreattachForTest(ctx context.Context) { a.preattach(ctx, a.deps.Store.LiveUIDs()) }

// SyncForTest runs one sync of the VMI uid.
func (a *Agent) SyncForTest(ctx context.Context, uid string) error { return a.sync(ctx, uid) }

// SetCacheForTest replaces the informer caches with objs (VMIs and pods),
// as the informers would after a list.
func (a *Agent) SetCacheForTest(objs ...runtime.Object) error {
	var vmis, pods []any
	for _, o := range objs {
		switch obj := o.(type) {
		case *v1.VirtualMachineInstance:
			// As the informers' label selectors: a VMI labelled for no
			// node and no migration to this one is not in the caches.
			if obj.Labels[v1.NodeNameLabel] == a.cfg.NodeName ||
				obj.Labels[v1.MigrationTargetNodeNameLabel] == a.cfg.NodeName {
				vmis = append(vmis, o)
			}
		case *corev1.Pod:
			pods = append(pods, o)
		}
	}
	if err := a.vmis.GetIndexer().Replace(vmis, ""); err != nil {
		return err
	}
	return a.pods.GetIndexer().Replace(pods, "")
}

// SetClockForTest makes now the agent's clock.
func (a *Agent) SetClockForTest(now func() time.Time) { a.now = now }

// CloseForTest closes every domain's connections and watchers.
func (a *Agent) CloseForTest() {
	a.closeDomains()
	_ = a.deps.Pods.Close()
}
