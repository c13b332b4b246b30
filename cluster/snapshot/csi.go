package snapshot

import (
	"context"
	"fmt"
	"sort"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// defaultClassAnnotation marks the default VolumeSnapshotClass of a driver
// (the CSI snapshotter's annotation).
const defaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

// ClusterCSI is the cluster's CSI snapshot API (snapshot.storage.k8s.io),
// read on demand: it may be installed after the controller started, or
// not at all.
type ClusterCSI struct {
	Snapshots snapclientset.Interface
	Storage   storagev1client.StorageClassesGetter
}

// VolumeSnapshot returns the named VolumeSnapshot, nil when absent.
func (c ClusterCSI) VolumeSnapshot(ctx context.Context, namespace, name string) (*snapv1.VolumeSnapshot, error) {
	if c.Snapshots == nil {
		return nil, nil
	}
	vs, err := c.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get volume snapshot %s/%s: %w", namespace, name, err)
	}
	return vs, nil
}

// CreateVolumeSnapshot creates vs.
func (c ClusterCSI) CreateVolumeSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	_, err := c.Snapshots.SnapshotV1().VolumeSnapshots(vs.Namespace).Create(ctx, vs, metav1.CreateOptions{FieldManager: v1.ManagerController})
	return err
}

// ClassFor picks the VolumeSnapshotClass of pvc's CSI driver (its
// StorageClass's provisioner): the one marked default, else the first by
// name. It says why there is none when there is none.
func (c ClusterCSI) ClassFor(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (class, why string, err error) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return "", fmt.Sprintf("claim %s has no StorageClass: no CSI driver to snapshot it", pvc.Name), nil
	}
	sc, err := c.Storage.StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Sprintf("StorageClass %s of claim %s does not exist", *pvc.Spec.StorageClassName, pvc.Name), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("get storage class %s: %w", *pvc.Spec.StorageClassName, err)
	}
	if c.Snapshots == nil {
		return "", "the controller has no client of the CSI volume snapshot API", nil
	}
	list, err := c.Snapshots.SnapshotV1().VolumeSnapshotClasses().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return "", "the cluster does not serve CSI volume snapshots (snapshot.storage.k8s.io)", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("list volume snapshot classes: %w", err)
	}
	return PickClass(list.Items, sc.Provisioner, sc.Name)
}

// PickClass picks among classes the one for driver: the one marked
// default, else the first by name. It is pure.
func PickClass(classes []snapv1.VolumeSnapshotClass, driver, storageClass string) (class, why string, err error) {
	var names []string
	for _, c := range classes {
		if c.Driver != driver {
			continue
		}
		if c.Annotations[defaultClassAnnotation] == "true" {
			return c.Name, "", nil
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return "", fmt.Sprintf("no VolumeSnapshotClass for driver %s (StorageClass %s)", driver, storageClass), nil
	}
	sort.Strings(names)
	return names[0], "", nil
}
