package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
)

// VMIsByNode is the name of the VMI informer index by kubevirt.io/nodeName
// (status.nodeName while the label is not there yet).
const VMIsByNode = "node"

// VMIIndexers are the indexers the VMI informer must carry for this controller.
func VMIIndexers() cache.Indexers {
	return cache.Indexers{VMIsByNode: func(obj any) ([]string, error) {
		vmi, ok := obj.(*v1.VirtualMachineInstance)
		if !ok {
			return nil, fmt.Errorf("vmi index: unexpected %T", obj)
		}
		n := vmi.Labels[v1.NodeNameLabel]
		if n == "" {
			// Taken over by the node's agent, not labelled yet
			// (node/agent/prelaunch.go).
			n = vmi.Status.NodeName
		}
		if n != "" {
			return []string{n}, nil
		}
		return nil, nil
	}}
}

// Defaults.
const (
	DefaultThreshold = 5 * time.Minute
	DefaultRecheck   = 15 * time.Second
)

// EventNodeUnresponsive is recorded on each VMI failed by this controller.
const EventNodeUnresponsive = "NodeUnresponsive"

// Enqueuer schedules a later sync of a key.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// PodChecker reports whether a VMI's launcher pod still exists.
type PodChecker func(vmi *v1.VirtualMachineInstance) bool

// Deps are the node controller's collaborators.
type Deps struct {
	Nodes     corelisters.NodeLister
	VMIs      cache.Indexer // VMI informer indexer with VMIIndexers
	PodExists PodChecker
	NodeAPI   corev1client.NodesGetter
	Client    kvclient.VirtualMachineInstancesGetter
	Recorder  record.EventRecorder
	Queue     Enqueuer // may be nil in tests
	Threshold time.Duration
	// LiveThreshold, when set, is the threshold in force, read for each
	// sync instead of Threshold (cluster/liveconfig).
	LiveThreshold func() time.Duration
	Recheck       time.Duration
	Now           func() time.Time
}

// Controller fails VMIs of nodes whose agent stopped heartbeating.
type Controller struct {
	d Deps

	mu   sync.Mutex
	seen map[string]seenBeat // node name → its heartbeat as this controller first saw it
}

// seenBeat is a node's heartbeat value and when this controller first saw
// it.
type seenBeat struct {
	value string
	at    time.Time
}

// New returns a node controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Threshold <= 0 {
		d.Threshold = DefaultThreshold
	}
	if d.Recheck <= 0 {
		d.Recheck = DefaultRecheck
	}
	return &Controller{d: d, seen: map[string]seenBeat{}}
}

// threshold is the heartbeat age in force after which a node is
// unresponsive.
func (c *Controller) threshold() time.Duration {
	if c.d.LiveThreshold != nil {
		if t := c.d.LiveThreshold(); t > 0 {
			return t
		}
	}
	return c.d.Threshold
}

// Sync reconciles the node named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	node, err := c.d.Nodes.Get(key)
	if apierrors.IsNotFound(err) {
		node = nil
	} else if err != nil {
		return fmt.Errorf("get node %s: %w", key, err)
	}
	objs, err := c.d.VMIs.ByIndex(VMIsByNode, key)
	if err != nil {
		return fmt.Errorf("vmis of node %s: %w", key, err)
	}
	vmis := make([]*v1.VirtualMachineInstance, 0, len(objs))
	for _, o := range objs {
		if vmi, ok := o.(*v1.VirtualMachineInstance); ok {
			vmis = append(vmis, vmi)
		}
	}
	now := c.d.Now()
	res := Plan(Observed{Node: node, VMIs: vmis, PodExists: c.d.PodExists, HeartbeatSeen: c.heartbeatSeen(key, node, now),
		Now: now, Threshold: c.threshold(), Recheck: c.d.Recheck})
	if res.MarkUnschedulable {
		if err := c.markUnschedulable(ctx, key); err != nil {
			return err
		}
	}
	for _, vmi := range res.Fail {
		if err := c.fail(ctx, vmi, now); err != nil {
			return err
		}
	}
	if res.RequeueAfter > 0 && c.d.Queue != nil && (node != nil || len(vmis) > 0) {
		c.d.Queue.EnqueueAfter(key, res.RequeueAfter)
	}
	return nil
}

// heartbeatSeen returns when this controller first saw node's current
// heartbeat, remembering it (and forgetting nodes that are gone).
func (c *Controller) heartbeatSeen(key string, node *corev1.Node, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if node == nil {
		delete(c.seen, key)
		return time.Time{}
	}
	v := node.Annotations[v1.HeartbeatAnnotation]
	if s, ok := c.seen[key]; ok && s.value == v {
		return s.at
	}
	c.seen[key] = seenBeat{value: v, at: now}
	return now
}

func (c *Controller) markUnschedulable(ctx context.Context, name string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1.SchedulableLabel: "false"}}})
	if err != nil {
		return err
	}
	_, err = c.d.NodeAPI.Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerNodeController})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("mark node %s unschedulable: %w", name, err)
	}
	return nil
}

// fail moves vmi to Failed with reason NodeUnresponsive: the one write of
// an agent-owned field outside the agent (see v1.StatusOwnership). It
// applies only the node controller's fields, under its own field manager,
// with the cached resourceVersion as a precondition.
func (c *Controller) fail(ctx context.Context, vmi *v1.VirtualMachineInstance, now time.Time) error {
	err := v1.ApplyStatus(ctx, c.d.Client.VirtualMachineInstances(vmi.Namespace), vmi, FailedStatus(vmi, now), v1.ManagerNodeController)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fail vmi on unresponsive node: %w", err)
	}
	c.d.Recorder.Eventf(vmi, corev1.EventTypeWarning, EventNodeUnresponsive, "Node %s is unresponsive: its agent stopped heartbeating", vmi.Status.NodeName)
	return nil
}
