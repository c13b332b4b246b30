package replicaset

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// adopt makes rs the controller of an orphan VMI. The patch carries the
// VMI's UID and resourceVersion: a VMI changed meanwhile (adopted by
// another owner, relabelled) makes it fail with a conflict and the next
// sync looks again.
func (c *Controller) adopt(ctx context.Context, rs *v1.VirtualMachineInstanceReplicaSet, vmi *v1.VirtualMachineInstance) error {
	refs := append(append([]metav1.OwnerReference{}, vmi.OwnerReferences...), OwnerRef(rs))
	if err := c.patchOwners(ctx, vmi, refs); err != nil {
		return fmt.Errorf("adopt vmi %s/%s into replica set %s: %w", vmi.Namespace, vmi.Name, rs.Name, err)
	}
	c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventAdopted, "Adopted orphan VirtualMachineInstance %s", vmi.Name)
	return nil
}

// release removes rs's owner reference from a VMI its selector no longer
// matches; the VMI keeps running as an orphan.
func (c *Controller) release(ctx context.Context, rs *v1.VirtualMachineInstanceReplicaSet, vmi *v1.VirtualMachineInstance) error {
	var refs []metav1.OwnerReference
	for _, r := range vmi.OwnerReferences {
		if r.UID != rs.UID {
			refs = append(refs, r)
		}
	}
	if err := c.patchOwners(ctx, vmi, refs); err != nil {
		return fmt.Errorf("release vmi %s/%s from replica set %s: %w", vmi.Namespace, vmi.Name, rs.Name, err)
	}
	c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventReleased, "Released VirtualMachineInstance %s: its labels no longer match the selector", vmi.Name)
	return nil
}

func (c *Controller) patchOwners(ctx context.Context, vmi *v1.VirtualMachineInstance, refs []metav1.OwnerReference) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs, "uid": vmi.UID, "resourceVersion": vmi.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	_, err = c.d.Client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerController})
	return err
}

// VMIHandler returns VMI informer handlers that settle the expectations of
// the VMI's replica set and enqueue it through enqueue (a namespace/name
// key): the controlling replica set of an owned VMI, every replica set
// whose selector matches an orphan (it may adopt it), and on a change of
// owner or labels the former controller too.
func (c *Controller) VMIHandler(enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			vmi, ok := obj.(*v1.VirtualMachineInstance)
			if !ok {
				return
			}
			if key := controllerKey(vmi); key != "" {
				if vmi.DeletionTimestamp != nil {
					c.expect.Deleted(key, vmi.UID)
				} else {
					c.expect.Created(key)
				}
			}
			c.enqueueFor(vmi, enqueue)
		},
		UpdateFunc: func(oldObj, curObj any) {
			old, ok1 := oldObj.(*v1.VirtualMachineInstance)
			cur, ok2 := curObj.(*v1.VirtualMachineInstance)
			if !ok1 || !ok2 {
				return
			}
			if key := controllerKey(cur); key != "" && cur.DeletionTimestamp != nil {
				c.expect.Deleted(key, cur.UID)
			}
			if oldKey := controllerKey(old); oldKey != "" && oldKey != controllerKey(cur) {
				enqueue(oldKey)
			}
			if !labels.Equals(old.Labels, cur.Labels) {
				c.enqueueFor(old, enqueue)
			}
			c.enqueueFor(cur, enqueue)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			vmi, ok := obj.(*v1.VirtualMachineInstance)
			if !ok {
				return
			}
			if key := controllerKey(vmi); key != "" {
				c.expect.Deleted(key, vmi.UID)
				enqueue(key)
			}
		},
	}
}

// enqueueFor enqueues the controller of an owned VMI, or every replica set
// of the namespace whose selector matches an orphan.
func (c *Controller) enqueueFor(vmi *v1.VirtualMachineInstance, enqueue func(key string)) {
	if key := controllerKey(vmi); key != "" {
		enqueue(key)
		return
	}
	if metav1.GetControllerOf(vmi) != nil || vmi.DeletionTimestamp != nil {
		return
	}
	sets, err := c.d.ReplicaSets.VirtualMachineInstanceReplicaSets(vmi.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, rs := range sets {
		sel, err := rs.Spec.Selector.AsSelector()
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(vmi.Labels)) {
			enqueue(rs.Namespace + "/" + rs.Name)
		}
	}
}

// controllerKey is the namespace/name key of the replica set controlling
// vmi, "" if none does.
func controllerKey(vmi *v1.VirtualMachineInstance) string {
	ref := metav1.GetControllerOf(vmi)
	if ref == nil || ref.Kind != Kind {
		return ""
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1.GroupName {
		return ""
	}
	return vmi.Namespace + "/" + ref.Name
}
