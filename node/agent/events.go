package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// newRecorder returns an event recorder writing to the API server until
// ctx ends.
func (a *Agent) newRecorder(ctx context.Context) record.EventRecorder {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.deps.Kube.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return b.NewRecorder(scheme, corev1.EventSource{Component: "nodevirt-agent", Host: a.cfg.NodeName})
}

func (a *Agent) normal(vmi *v1.VirtualMachineInstance, reason, msg string) {
	if a.recorder != nil && vmi != nil {
		a.recorder.Event(vmi, corev1.EventTypeNormal, reason, msg)
	}
}

func (a *Agent) warn(vmi *v1.VirtualMachineInstance, reason, msg string) {
	if a.recorder != nil && vmi != nil {
		a.recorder.Event(vmi, corev1.EventTypeWarning, reason, msg)
	}
}

// EventNodeStoreFull is the warning on a VMI new to a node that takes no
// new VMIs because the agent's store filesystem is full (node/storeguard).
const EventNodeStoreFull = "NodeStoreFull"
