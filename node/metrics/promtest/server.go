package promtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Config is which Prometheus runs and what it scrapes.
type Config struct {
	// Binary is the prometheus executable; "" means prometheus on $PATH
	// (the Debian package, `make metrics-deps`, which has no Kubernetes
	// service discovery). promtool is looked up next to Binary, else on
	// $PATH when Binary is "".
	Binary string
	// ScrapeInterval is the global scrape interval and timeout; 0 means 1 s.
	ScrapeInterval time.Duration
	// ScrapeConfigs is the YAML list under scrape_configs (items starting
	// with "- job_name:" at column 0), e.g. from StaticScrape.
	ScrapeConfigs string
}

// Server is a running Prometheus.
type Server struct {
	// URL is the base URL of its web and HTTP API, http://127.0.0.1:<port>.
	URL    string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	client *http.Client
}

// StaticScrape is a scrape config for one static target (host:port).
func StaticScrape(job, target string) string {
	return fmt.Sprintf("- job_name: %q\n  static_configs:\n  - targets: [%q]\n", job, target)
}

// Start runs Prometheus with cfg until the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin, promtool := binaries(t, cfg.Binary)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(configYAML(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	if promtool != "" {
		checkConfig(t, promtool, cfgPath)
	}

	addr := testenv.FreeLoopbackAddr(t)
	s := &Server{
		URL:    "http://" + addr,
		log:    filepath.Join(dir, "prometheus.log"),
		exited: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second},
	}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Dies with the test binary even if the cleanup never runs.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("prometheus log tail:\n%s", s.LogTail(30))
		}
	})
	s.waitReady(t, 60*time.Second)
	return s
}

// binaries returns the prometheus and promtool ("" if absent) to run.
func binaries(t testing.TB, bin string) (prometheus, promtool string) {
	t.Helper()
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("prometheus binary: %v", err)
		}
		promtool = filepath.Join(filepath.Dir(bin), "promtool")
		if _, err := os.Stat(promtool); err != nil {
			promtool = ""
		}
		return bin, promtool
	}
	bin, err := exec.LookPath("prometheus")
	testenv.Require(t, err == nil, "the prometheus server", "metrics-deps")
	promtool, _ = exec.LookPath("promtool")
	return bin, promtool
}

// configYAML renders the whole configuration file.
func configYAML(cfg Config) string {
	iv := cfg.ScrapeInterval
	if iv <= 0 {
		iv = time.Second
	}
	return fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n%s",
		promDuration(iv), promDuration(iv), cfg.ScrapeConfigs)
}

// promDuration spells d in Prometheus' duration syntax (whole ms).
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// checkConfig validates the configuration file with promtool.
func checkConfig(t testing.TB, promtool, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "config", path).CombinedOutput(); err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("promtool check config: %v\n%s\nconfig:\n%s", err, out, b)
	}
}

// waitReady polls /-/ready until Prometheus answers 200, failing early if
// it exits.
func (s *Server) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			t.Fatalf("prometheus exited during start-up:\n%s", s.LogTail(30))
		default:
		}
		if resp, err := s.client.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after %v:\n%s", timeout, s.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
