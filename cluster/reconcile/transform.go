package reconcile

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StripManagedFields is an informer transform (cache.TransformFunc) that
// drops metadata.managedFields from cached objects: no loop reads them,
// and they are often the largest part of an object.
func StripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
