package consoleui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

const (
	namespace = "consoleui-e2e"
	forbidden = "consoleui-e2e-forbidden"
	vmName    = "console-demo"
	user      = "console-user"
)

func TestConsoleUI(t *testing.T) {
	localcluster.RequirePrereqs(t) // skips in -short mode
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(root, "cluster", "consoleui", "web")
	chromium, node := lookPath("chromium"), lookPath("node")
	testenv.Require(t, chromium != "", "Debian's chromium", "console-ui-deps")
	testenv.Require(t, node != "", "node", "console-ui-deps")
	testenv.RequireFiles(t, "console-ui-deps",
		filepath.Join(root, "cluster", "consoleui", "assets", "index.html"),
		filepath.Join(web, "node_modules", "playwright-core", "package.json"))

	start := time.Now()
	e := setUp(t)
	t.Logf("setup (cluster, images, deploy): %v", time.Since(start).Round(100*time.Millisecond))
	shots := filepath.Join(e.out, "consoleui")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	e.kubectl(t, "", "create", "namespace", namespace)
	e.kubectl(t, "", "create", "namespace", forbidden)
	t.Cleanup(func() { e.cleanUp(t) })
	vmi := e.startVM(t)
	kubeconfig := e.userKubeconfig(t)

	url := startPlugin(t, root, e.out, kubeconfig)
	began := time.Now()
	res := e.runBrowser(t, browserRun{node: node, chromium: chromium, web: web, shots: shots, url: url, vmi: vmi})
	t.Logf("browser run: %v; results: %s", time.Since(began).Round(100*time.Millisecond), res)
	t.Logf("screenshots in %s", shots)
}

func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// startVM creates the example VM with a VNC screen (kernel messages on
// the VGA console too) and waits for its guest agent.
func (e *env) startVM(t *testing.T) *v1.VirtualMachineInstance {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, "deploy", "examples", "vm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	for _, edit := range [][2]string{
		{"name: demo\n", "name: " + vmName + "\n"},
		{"autoattachGraphicsDevice: false", "autoattachGraphicsDevice: true"},
		{"kernelArgs: console=ttyS0 quiet panic=-1", "kernelArgs: console=tty0 console=ttyS0 panic=-1"},
	} {
		if !strings.Contains(m, edit[0]) {
			t.Fatalf("deploy/examples/vm.yaml: %q not found", edit[0])
		}
		m = strings.Replace(m, edit[0], edit[1], 1)
	}
	e.kubectl(t, m, "apply", "-n", namespace, "-f", "-")
	return e.waitVMI(t, 4*time.Minute, "Running with its guest agent connected", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Phase == v1.Running && condition(v, v1.VirtualMachineInstanceAgentConnected) == corev1.ConditionTrue
	})
}

func condition(v *v1.VirtualMachineInstance, typ v1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range v.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func (e *env) waitVMI(t *testing.T, timeout time.Duration, what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	t.Helper()
	var got *v1.VirtualMachineInstance
	testenv.Eventually(t, timeout, "VMI "+vmName+" "+what, func() error {
		v, err := e.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), vmName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !cond(v) {
			return fmt.Errorf("phase %s, conditions %+v", v.Status.Phase, v.Status.Conditions)
		}
		got = v
		return nil
	})
	return got
}

// userKubeconfig makes the ServiceAccount user with the built-in edit and
// view roles (kubevirt.io:edit and :view aggregate into them) in
// namespace and nothing in forbidden, and writes a kubeconfig with its
// token as the only credential.
func (e *env) userKubeconfig(t *testing.T) string {
	t.Helper()
	e.kubectl(t, "", "create", "serviceaccount", "-n", namespace, user)
	for _, role := range []string{"edit", "view"} {
		e.kubectl(t, "", "create", "rolebinding", "-n", namespace, user+"-"+role, "--clusterrole="+role,
			"--serviceaccount="+namespace+":"+user)
	}
	token := strings.TrimSpace(e.kubectl(t, "", "create", "token", "-n", namespace, user, "--duration=1h"))
	admin, err := clientcmd.LoadFromFile(e.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := admin.Contexts[admin.CurrentContext]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = admin.Clusters[ctx.Cluster]
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = user
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPlugin builds cmd/kubectl-nodevirt, runs it as `kubectl nodevirt
// console-ui` (kubectl finds the plugin on PATH) and returns the URL it
// prints.
func startPlugin(t *testing.T, root, out, kubeconfig string) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-nodevirt")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-nodevirt: %v\n%s", err, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(out, "k8s", "bin", "kubectl"), "nodevirt", "console-ui", "--kubeconfig", kubeconfig, "-v")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stderr = testenv.LogWriter(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "nodevirt console: "); ok {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl nodevirt console-ui printed no URL in 30 s")
		return ""
	}
}

type browserRun struct {
	node, chromium, web, shots, url string
	vmi                             *v1.VirtualMachineInstance
}

// runBrowser runs browser.mjs, answers its checkpoints after checking the
// API as admin, and returns its RESULT line.
func (e *env) runBrowser(t *testing.T, r browserRun) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.node, "browser.mjs")
	cmd.Env = append(os.Environ(), "CONSOLEUI_URL="+r.url, "CONSOLEUI_NS="+namespace, "CONSOLEUI_VM="+vmName,
		"CONSOLEUI_FORBIDDEN="+forbidden, "CONSOLEUI_OUT="+r.shots, "CONSOLEUI_WEB="+r.web, "CHROMIUM="+r.chromium)
	cmd.Stderr = testenv.LogWriter(t)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	result := ""
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		switch {
		case line == "CHECKPOINT paused":
			e.answer(t, stdin, "Paused=True", func(v *v1.VirtualMachineInstance) bool {
				return condition(v, v1.VirtualMachineInstancePaused) == corev1.ConditionTrue
			})
		case line == "CHECKPOINT restarted":
			e.answer(t, stdin, "a new Running VMI", func(v *v1.VirtualMachineInstance) bool {
				return v.UID != r.vmi.UID && v.Status.Phase == v1.Running
			})
		case strings.HasPrefix(line, "RESULT "):
			result = strings.TrimPrefix(line, "RESULT ")
		}
	}
	err = cmd.Wait()
	var res struct {
		Errors []string `json:"errors"`
	}
	if jerr := json.Unmarshal([]byte(result), &res); jerr != nil {
		t.Fatalf("browser.mjs: no result (%v, exit %v)", jerr, err)
	}
	for _, e := range res.Errors {
		t.Error(e)
	}
	if err != nil && len(res.Errors) == 0 {
		t.Errorf("browser.mjs: %v", err)
	}
	return result
}

// answer checks the VMI on the API (as admin) and lets the script go on.
func (e *env) answer(t *testing.T, w io.Writer, what string, cond func(*v1.VirtualMachineInstance) bool) {
	t.Helper()
	reply := "ok"
	var last string
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := e.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), vmName, metav1.GetOptions{})
		if err == nil && cond(v) {
			t.Logf("API: VMI %s %s", vmName, what)
			break
		}
		last = fmt.Sprintf("err %v", err)
		if v != nil && err == nil {
			last = fmt.Sprintf("phase %s conditions %+v", v.Status.Phase, v.Status.Conditions)
		}
		if time.Now().After(deadline) {
			t.Errorf("the page showed it, but the API does not say %s: %s", what, last)
			reply = "API disagrees"
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := io.WriteString(w, reply+"\n"); err != nil {
		t.Errorf("answer the browser script: %v", err)
	}
}

// cleanUp deletes the namespaces, waiting for the VM to stop (the agent
// removes the VMI finalizer after QEMU exits).
func (e *env) cleanUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, _ = e.cluster.Kubectl(ctx, nil, "delete", "namespace", forbidden, "--wait=false")
	if _, err := e.cluster.Kubectl(ctx, nil, "delete", "namespace", namespace, "--wait=true", "--timeout=170s"); err != nil {
		t.Errorf("delete namespace %s: %v", namespace, err)
	}
}
