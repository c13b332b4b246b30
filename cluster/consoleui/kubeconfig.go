package consoleui

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kube is what the server takes from the user's kubeconfig.
type Kube struct {
	// Rest holds the API server's address and the user's credentials.
	Rest *rest.Config
	// Namespace is the one the page opens with: the flag, else the
	// context's, else "default" (kubectl's rule).
	Namespace string
	// Context is the name of the kubeconfig context in use.
	Context string
}

// KubeFlags are kubectl's flags that pick a cluster, user and namespace.
type KubeFlags struct {
	Kubeconfig string // --kubeconfig; empty: $KUBECONFIG, then ~/.kube/config
	Context    string // --context
	Namespace  string // -n/--namespace
}

// LoadKube reads the kubeconfig the way kubectl does (the same loading
// rules and overrides).
func LoadKube(f KubeFlags) (Kube, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	overrides.Context.Namespace = f.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return Kube{}, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return Kube{}, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return Kube{}, fmt.Errorf("kubeconfig: %w", err)
	}
	name := raw.CurrentContext
	if f.Context != "" {
		name = f.Context
	}
	return Kube{Rest: rc, Namespace: ns, Context: name}, nil
}
