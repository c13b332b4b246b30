package heartbeat_test

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodevirt/nodevirt/node/heartbeat"
)

// The node agent beats for its own node while it runs; cancelling ctx marks
// the node unschedulable.
func Example() {
	var client kubernetes.Interface // the agent's clientset
	ctx := context.Background()     // the agent's lifetime
	hb, err := heartbeat.New(heartbeat.Config{
		NodeName: "node-1", // from the downward API (spec.nodeName)
		Interval: 30 * time.Second,
		Logger:   slog.Default(),
	}, client.CoreV1().Nodes())
	if err != nil {
		panic(err)
	}
	go func() {
		// Returns once ctx is cancelled, with the error of the final
		// schedulable=false patch, if any.
		if err := hb.Run(ctx); err != nil {
			slog.Warn("heartbeat stop", "err", err)
		}
	}()
}
