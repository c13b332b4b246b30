package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// The agent reaches the launcher through the pod's sockets emptyDir on the
// host, learns the launcher's host pid (for the pod netns) and sends the
// spec.
func ExampleClient() {
	sockets := "/var/lib/kubelet/pods/<pod uid>/volumes/kubernetes.io~empty-dir/sockets"
	sock := filepath.Join(sockets, launchspec.LauncherSocket)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pid, err := launcher.PeerPID(ctx, sock)
	if err != nil {
		fmt.Println("launcher not up yet")
		return
	}
	fmt.Println("pod netns:", fmt.Sprintf("/proc/%d/ns/net", pid))

	var spec launchspec.Spec // from convert.Build
	c := launcher.NewClient(sock)
	st, err := c.Launch(ctx, spec)
	if errors.Is(err, launcher.ErrConflict) {
		fmt.Println("the pod already runs another spec")
		return
	}
	fmt.Println(st.State, err)
}
