package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// The harness of scenario 16: KubeVirt's virtctl run as a ServiceAccount,
// long-running virtctl sessions, and raw requests to the API server.

// virtctl runs KubeVirt's virtctl binary as one kubeconfig's user.
type virtctl struct {
	bin, kubeconfig string
}

// run runs virtctl with args in the suite's namespace and returns its
// combined output.
func (v virtctl) run(ctx context.Context, args ...string) (string, error) {
	return v.runIn(ctx, namespace, args...)
}

// runIn runs virtctl with args in namespace ns.
func (v virtctl) runIn(ctx context.Context, ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.bin, append([]string{"--kubeconfig", v.kubeconfig, "-n", ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virtctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// must runs virtctl with args and fails the test on error.
func (v virtctl) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := v.run(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// session is a long-running virtctl (console, vnc, port-forward).
type session struct {
	in   io.WriteCloser
	out  *testenv.LockedBuffer
	done chan struct{} // closed when the process has exited
	stop func()        // kills the process if it runs and waits for it
}

// ended reports whether the process has exited.
func (p *session) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start starts a long-running virtctl with its stdin a pipe; owner's
// cleanup (t's or an enclosing test's) stops it by its pid.
func (v virtctl) start(t, owner *testing.T, args ...string) *session {
	t.Helper()
	cmd := exec.Command(v.bin, append([]string{"--kubeconfig", v.kubeconfig, "-n", namespace}, args...)...)
	p := &session{out: &testenv.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	p.stop = func() {
		if !p.ended() {
			_ = cmd.Process.Kill()
		}
		<-p.done
	}
	owner.Cleanup(p.stop)
	return p
}

// editUser creates the ServiceAccount virtctlUser bound to kubevirt.io:edit
// in the suite's namespace and returns a token for it; owner's cleanup (t's
// or an enclosing test's) deletes them.
func (s *suite) editUser(t, owner *testing.T) string {
	t.Helper()
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[1]s-edit
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kubevirt.io:edit
subjects:
- kind: ServiceAccount
  name: %[1]s
  namespace: %[2]s
`, virtctlUser, namespace)))
	if _, err := s.kubectlErr(nil, "get", "namespace", otherNamespace); err != nil {
		s.kubectl(t, nil, "create", "namespace", otherNamespace)
	}
	owner.Cleanup(func() {
		_, _ = s.kubectlErr(nil, "delete", "namespace", otherNamespace, "--wait=false")
		_, _ = s.kubectlErr(nil, "delete", "-n", namespace, "rolebinding", virtctlUser+"-edit", "--ignore-not-found")
		_, _ = s.kubectlErr(nil, "delete", "-n", namespace, "serviceaccount", virtctlUser, "--ignore-not-found")
	})
	return strings.TrimSpace(s.kubectl(t, nil, "create", "token", "-n", namespace, virtctlUser, "--duration=2h"))
}

// userKubeconfig writes a kubeconfig for the cluster with token as its only
// credential.
func (s *suite) userKubeconfig(t *testing.T, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := admin.Contexts[admin.CurrentContext]
	if ctx == nil {
		t.Fatalf("kubeconfig %s: no current context", s.cluster.Kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = admin.Clusters[ctx.Cluster]
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["user"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user", Namespace: namespace}
	cfg.CurrentContext = "user"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawRequest sends method path to the cluster's API server with token as
// the bearer token (none when empty) and returns the status code and body.
func (s *suite) rawRequest(t *testing.T, token, method, path string) (int, string) {
	t.Helper()
	admin, err := clientcmd.BuildConfigFromFlags("", s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimRight(cfg.Host, "/")+path, bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// envDuration reads a duration from the environment, def when unset.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}
