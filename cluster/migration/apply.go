package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

var getOpts = metav1.GetOptions{}

// apply carries out a plan: finalizer, target pod, VMI labels and status,
// then the VMIM status. Each VMI write uses the VMI the previous one
// returned, so the resourceVersion preconditions chain.
func (c *Controller) apply(ctx context.Context, o Observed, res Result) error {
	m := o.VMIM
	if res.AddFinalizer || res.RemoveFinalizer {
		var err error
		if m, err = c.finalizer(ctx, m, res.AddFinalizer); err != nil || m == nil {
			return err
		}
	}
	if res.CreateTargetPod {
		if err := c.createTargetPod(ctx, o); err != nil {
			return err
		}
	}
	if res.DeleteTargetPod {
		if err := c.deletePod(ctx, o.TargetPod); err != nil {
			return err
		}
	}
	if o.VMI != nil {
		if err := c.applyVMI(ctx, o.VMI, res); err != nil {
			return err
		}
	}
	if res.RemoveFinalizer || equality.Semantic.DeepEqual(m.Status, res.Status) {
		return nil
	}
	if err := c.applyStatus(ctx, m, res.Status); err != nil {
		return err
	}
	switch {
	case res.Status.Phase == v1.MigrationSucceeded && m.Status.Phase != v1.MigrationSucceeded:
		c.d.Recorder.Eventf(m, corev1.EventTypeNormal, EventSucceeded, "VMI %s migrated to %s", m.Spec.VMIName, res.Status.MigrationState.TargetNode)
	case res.Status.Phase == v1.MigrationFailed && m.Status.Phase != v1.MigrationFailed:
		c.d.Recorder.Eventf(m, corev1.EventTypeWarning, EventFailed, "Migration of VMI %s failed: %s", m.Spec.VMIName, failedMessage(res.Status))
	}
	return nil
}

func failedMessage(s v1.VirtualMachineInstanceMigrationStatus) string {
	for _, c := range s.Conditions {
		if c.Type == ConditionFailed {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// finalizer adds or removes kubevirt.io/migrationJobFinalize; it returns
// the VMIM as written (nil once it is gone).
func (c *Controller) finalizer(ctx context.Context, m *v1.VirtualMachineInstanceMigration, add bool) (*v1.VirtualMachineInstanceMigration, error) {
	m = m.DeepCopy()
	if add {
		m.Finalizers = append(m.Finalizers, v1.MigrationFinalizer)
	} else {
		m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == v1.MigrationFinalizer })
	}
	out, err := c.d.Client.VirtualMachineInstanceMigrations(m.Namespace).Update(ctx, m, metav1.UpdateOptions{FieldManager: v1.ManagerMigrationController})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update finalizers of vmim %s/%s: %w", m.Namespace, m.Name, err)
	}
	if !add {
		return nil, nil
	}
	return out, nil
}

func (c *Controller) createTargetPod(ctx context.Context, o Observed) error {
	cfg := c.d.Accelerators.TargetConfig(c.d.Shapes.Config(c.podConfig()), o.SourcePod)
	pod, err := vmi.RenderTargetPod(o.VMI, cfg, vmi.ModesOfPod(o.SourcePod), vmi.TargetOptions{
		MigrationUID: string(o.VMIM.UID), Name: targetPodName(o.VMI.Name, string(o.VMIM.UID)),
		Source: o.SourcePod, AddedNodeSelector: o.VMIM.Spec.AddedNodeSelector,
	})
	if err != nil {
		return fmt.Errorf("render target pod of vmim %s/%s: %w", o.VMIM.Namespace, o.VMIM.Name, err)
	}
	_, err = c.d.PodAPI.Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: v1.ManagerMigrationController})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		c.d.Recorder.Eventf(o.VMIM, corev1.EventTypeWarning, EventFailedCreatePod, "Error creating target pod: %v", err)
		return fmt.Errorf("create target pod of vmim %s/%s: %w", o.VMIM.Namespace, o.VMIM.Name, err)
	}
	c.d.Recorder.Eventf(o.VMIM, corev1.EventTypeNormal, EventCreatedTargetPod, "Created target pod %s", pod.Name)
	return nil
}

func (c *Controller) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.d.PodAPI.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete target pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// applyVMI writes label changes (merge patch), drops an earlier
// migration's migrationState (JSON patch testing its UID) and applies the
// controller's VMI status fields.
func (c *Controller) applyVMI(ctx context.Context, cur *v1.VirtualMachineInstance, res Result) error {
	api := c.d.Client.VirtualMachineInstances(cur.Namespace)
	if len(res.VMILabels) > 0 {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels": res.VMILabels, "resourceVersion": cur.ResourceVersion}})
		if err != nil {
			return err
		}
		out, err := api.Patch(ctx, cur.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: v1.ManagerMigrationController})
		if err != nil {
			return fmt.Errorf("label vmi %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		cur = out
	}
	if res.ResetMigrationState && cur.Status.MigrationState != nil {
		body, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/status/migrationState/migrationUid", "value": cur.Status.MigrationState.MigrationUID},
			{"op": "remove", "path": "/status/migrationState"},
		})
		if err != nil {
			return err
		}
		out, err := api.Patch(ctx, cur.Name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: v1.ManagerMigrationController}, "status")
		if err != nil {
			return fmt.Errorf("reset migrationState of vmi %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		cur = out
	}
	if res.VMIStatus == nil {
		return nil
	}
	want, err := res.VMIStatus.OwnedBy(v1.ManagerMigrationController)
	if err != nil {
		return err
	}
	have, err := cur.Status.OwnedBy(v1.ManagerMigrationController)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(want, have) {
		return nil
	}
	return v1.ApplyStatus(ctx, api, cur, *res.VMIStatus, v1.ManagerMigrationController)
}

// applyStatus writes the VMIM status by server-side apply (the migration
// controller owns all of it), guarded by the VMIM's resourceVersion.
func (c *Controller) applyStatus(ctx context.Context, m *v1.VirtualMachineInstanceMigration, s v1.VirtualMachineInstanceMigrationStatus) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": v1.SchemeGroupVersion.String(),
		"kind":       v1.KindVMIM,
		"metadata":   map[string]any{"name": m.Name, "namespace": m.Namespace, "resourceVersion": m.ResourceVersion, "uid": m.UID},
		"status":     s,
	})
	if err != nil {
		return fmt.Errorf("encode status of vmim %s/%s: %w", m.Namespace, m.Name, err)
	}
	_, err = c.d.Client.VirtualMachineInstanceMigrations(m.Namespace).Patch(ctx, m.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: v1.ManagerMigrationController, Force: ptr.To(true)}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply status of vmim %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}
