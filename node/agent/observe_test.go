package agent

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	virtfake "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
)

// TestLiveVMI_WatchCacheFirst: the VMI is read from the API server's watch
// cache (resourceVersion "0"); only an answer that would drop it is read
// again from etcd, since the cache may lag behind a creation or a label.
func TestLiveVMI_WatchCacheFirst(t *testing.T) {
	vmi := func(label string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
		v := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "u1"}}
		if label != "" {
			v.Labels = map[string]string{v1.NodeNameLabel: label}
		}
		v.Status.Phase = phase
		return v
	}
	gone := apierrors.NewNotFound(schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}, "vm")
	for _, tc := range []struct {
		name         string
		cache, etcd  *v1.VirtualMachineInstance // nil: not found
		wantFound    bool
		wantVersions []string
	}{
		{"labelled for this node in the cache", vmi("node1", v1.Running), vmi("node1", v1.Running), true, []string{"0"}},
		{"prelaunch: unlabelled and Scheduling in the cache", vmi("", v1.Scheduling), vmi("", v1.Scheduling), true, []string{"0"}},
		{"not in the cache yet", nil, vmi("", v1.Scheduling), true, []string{"0", ""}},
		{"the cache has the old label", vmi("node2", v1.Running), vmi("node1", v1.Running), true, []string{"0", ""}},
		{"gone", nil, nil, false, []string{"0", ""}},
		{"on another node", vmi("node2", v1.Running), vmi("node2", v1.Running), false, []string{"0", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAgent(t)
			virt := virtfake.NewSimpleClientset()
			var versions []string
			virt.PrependReactor("get", "virtualmachineinstances", func(action k8stesting.Action) (bool, runtime.Object, error) {
				rv := action.(k8stesting.GetActionImpl).GetOptions.ResourceVersion
				versions = append(versions, rv)
				from := tc.etcd
				if rv == "0" {
					from = tc.cache
				}
				if from == nil {
					return true, nil, gone
				}
				return true, from.DeepCopy(), nil
			})
			a.deps.Virt = virt
			got, err := a.liveVMI(context.Background(), "ns", "vm", "u1")
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.wantFound {
				t.Errorf("liveVMI = %v, want found %v", got, tc.wantFound)
			}
			if !slices.Equal(versions, tc.wantVersions) {
				t.Errorf("reads at resourceVersions %q, want %q", versions, tc.wantVersions)
			}
		})
	}
}
