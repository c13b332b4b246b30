package agent

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	virtfake "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
)

func TestStatusPatcher(t *testing.T) {
	real, err := versioned.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := statusPatcher(real, "ns").(statusWriter); !ok {
		t.Errorf("statusPatcher(a REST clientset) = %T, want a statusWriter", statusPatcher(real, "ns"))
	}
	// The fake clientset has no REST client: its typed client does.
	if _, ok := statusPatcher(virtfake.NewSimpleClientset(), "ns").(statusWriter); ok {
		t.Error("statusPatcher(the fake clientset) is a statusWriter, want its typed client")
	}
}
