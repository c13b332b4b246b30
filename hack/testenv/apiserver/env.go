package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// startTimeout bounds how long etcd plus the API server may take to be ready.
const startTimeout = 90 * time.Second

// Env is a running etcd and kube-apiserver with the nodevirt CRDs installed.
type Env struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file with the same credentials, for
	// processes (kubectl, a controller under test) started by the test.
	Kubeconfig string
	// Dir holds the data, logs and credentials of this environment.
	Dir string
}

// Start runs a fresh etcd and kube-apiserver for the test and installs the
// CRDs from deploy/crds. Both processes are stopped in t.Cleanup.
func Start(t testing.TB) *Env {
	t.Helper()
	out, err := testenv.OutDir()
	if err != nil {
		t.Fatalf("testenv/apiserver: %v", err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatalf("testenv/apiserver: %v", err)
	}
	bin := filepath.Join(out, "k8s", "bin")
	etcdBin, apiserverBin := filepath.Join(bin, "etcd"), filepath.Join(bin, "kube-apiserver")
	testenv.RequireFiles(t, "testenv", etcdBin, apiserverBin)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	env := &Env{Dir: t.TempDir()}

	etcdURL, err := startEtcd(ctx, t, etcdBin, env.Dir)
	if err != nil {
		t.Fatalf("testenv/apiserver: %v", err)
	}
	if err := env.startAPIServer(ctx, t, apiserverBin, etcdURL); err != nil {
		t.Fatalf("testenv/apiserver: %v", err)
	}
	if err := InstallCRDs(ctx, env.Config, filepath.Join(root, "deploy", "crds")); err != nil {
		t.Fatalf("testenv/apiserver: %v", err)
	}
	return env
}

func startEtcd(ctx context.Context, t testing.TB, bin, dir string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcess(t, "etcd", filepath.Join(dir, "etcd.log"), bin,
		"-data-dir", filepath.Join(dir, "etcd"),
		"-listen-client-url", clientURL,
		"-listen-peer-url", "http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"-unsafe-no-fsync")
	if err != nil {
		return "", err
	}
	err = poll(ctx, p, func() bool {
		resp, err := http.Get(clientURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		return "", fmt.Errorf("etcd not healthy: %w\n%s", err, p.logTail())
	}
	return clientURL, nil
}

func (env *Env) startAPIServer(ctx context.Context, t testing.TB, bin, etcdURL string) error {
	dir := env.Dir
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKey(dir)
	if err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcess(t, "kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), bin,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[0]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
	)
	if err != nil {
		return err
	}
	env.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200,
		Burst:           400,
		// v1alpha3 is served deprecated on purpose; tests use it.
		WarningHandler: rest.NoWarnings{},
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err = poll(ctx, p, func() bool {
		req, _ := http.NewRequest(http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w\n%s", err, p.logTail())
	}
	env.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return writeKubeconfig(env.Kubeconfig, host, token)
}

func writeKubeconfig(path, host, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	cfg.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeServiceAccountKey(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
