package certsigner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

// BundleSelector selects the bundle ConfigMap (for a ConfigMap informer of
// the namespace).
var BundleSelector = fields.OneTermEqualSelector("metadata.name", certrotation.BundleConfigMap).String()

// Bundle keeps the ConfigMap nodevirt-ca-bundle (key ca.crt) equal to the
// CA's bundle: created when missing, put back when edited.
type Bundle struct {
	lister corelisters.ConfigMapNamespaceLister
	client corev1client.ConfigMapInterface
	pem    string
}

// NewBundle returns the publisher of ca's bundle through client (of the
// nodevirt namespace), observing through lister.
func NewBundle(ca *CA, lister corelisters.ConfigMapNamespaceLister, client corev1client.ConfigMapInterface) *Bundle {
	return &Bundle{lister: lister, client: client, pem: string(ca.BundlePEM())}
}

// Key is the queue key of the bundle ConfigMap.
func (b *Bundle) Key(namespace string) string { return namespace + "/" + certrotation.BundleConfigMap }

// Sync creates or repairs the bundle ConfigMap (any key is the one
// ConfigMap).
func (b *Bundle) Sync(ctx context.Context, _ string) error {
	cm, err := b.lister.Get(certrotation.BundleConfigMap)
	if apierrors.IsNotFound(err) {
		cm = nil
	} else if err != nil {
		return fmt.Errorf("get configmap %s: %w", certrotation.BundleConfigMap, err)
	}
	want, create := PlanBundle(cm, b.pem)
	switch {
	case want == nil:
		return nil
	case create:
		_, err = b.client.Create(ctx, want, metav1.CreateOptions{})
	default:
		_, err = b.client.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publish configmap %s: %w", certrotation.BundleConfigMap, err)
	}
	return nil
}

// PlanBundle returns the ConfigMap to write (nil: up to date) and whether
// to create it. It is pure; cur is never modified.
func PlanBundle(cur *corev1.ConfigMap, bundlePEM string) (*corev1.ConfigMap, bool) {
	if cur == nil {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: certrotation.BundleConfigMap,
				Labels: map[string]string{"app.kubernetes.io/part-of": "nodevirt", "app.kubernetes.io/managed-by": "nodevirt-controller"}},
			Data: map[string]string{certrotation.BundleKey: bundlePEM},
		}, true
	}
	if len(cur.Data) == 1 && cur.Data[certrotation.BundleKey] == bundlePEM && len(cur.BinaryData) == 0 {
		return nil, false
	}
	want := cur.DeepCopy()
	want.Data = map[string]string{certrotation.BundleKey: bundlePEM}
	want.BinaryData = nil
	return want, false
}
