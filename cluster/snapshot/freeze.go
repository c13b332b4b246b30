package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// SubresourceFreezer freezes and thaws guests the way `virtctl freeze`
// does: PUT .../virtualmachineinstances/{name}/freeze (with KubeVirt's
// unfreezeTimeout body) and .../unfreeze on the subresources.kubevirt.io
// API, which the node agent of the VMI's node carries out (and which
// thaws the guest by itself when the timeout passes).
type SubresourceFreezer struct {
	// REST is any REST client of the cluster (its host and credentials
	// are used with an absolute path).
	REST rest.Interface
}

func (f SubresourceFreezer) path(namespace, name, action string) string {
	return fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/%s", namespace, name, action)
}

// Freeze freezes the guest of VMI namespace/name for at most timeout.
func (f SubresourceFreezer) Freeze(ctx context.Context, namespace, name string, timeout time.Duration) error {
	body, err := json.Marshal(map[string]any{"unfreezeTimeout": metav1.Duration{Duration: timeout}})
	if err != nil {
		return err
	}
	if err := f.REST.Put().AbsPath(f.path(namespace, name, "freeze")).Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error(); err != nil {
		return fmt.Errorf("freeze vmi %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Unfreeze thaws the guest of VMI namespace/name.
func (f SubresourceFreezer) Unfreeze(ctx context.Context, namespace, name string) error {
	if err := f.REST.Put().AbsPath(f.path(namespace, name, "unfreeze")).Do(ctx).Error(); err != nil {
		return fmt.Errorf("unfreeze vmi %s/%s: %w", namespace, name, err)
	}
	return nil
}
