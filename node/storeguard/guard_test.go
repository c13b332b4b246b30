package storeguard

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

var t0 = time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)

func TestAssess(t *testing.T) {
	if s := Assess("/var/lib/nodevirt", 64<<20, 32<<20); s.Full || s.Reason != "" {
		t.Errorf("64Mi free of 32Mi: %+v, want not full", s)
	}
	s := Assess("/var/lib/nodevirt", 1<<20, 32<<20)
	if !s.Full {
		t.Fatalf("1Mi free of 32Mi: %+v, want full", s)
	}
	for _, want := range []string{"/var/lib/nodevirt", "1Mi free", "32Mi", "no new VMIs"} {
		if !strings.Contains(s.Reason, want) {
			t.Errorf("reason %q lacks %q", s.Reason, want)
		}
	}
}

func TestConditionPatch(t *testing.T) {
	for _, full := range []bool{true, false} {
		s := Assess("/d", 0, 1)
		if !full {
			s = Assess("/d", 2, 1)
		}
		var p struct {
			Status struct {
				Conditions []corev1.NodeCondition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(ConditionPatch(s, t0), &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Status.Conditions) != 1 {
			t.Fatalf("conditions %+v", p.Status.Conditions)
		}
		c := p.Status.Conditions[0]
		want := corev1.ConditionFalse
		if full {
			want = corev1.ConditionTrue
		}
		if c.Type != ConditionType || c.Status != want || c.Message == "" || !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("full=%v: condition %+v", full, c)
		}
	}
}

// fakeNodes records the status patches.
type fakeNodes struct {
	mu      sync.Mutex
	patches []string
	fail    bool
}

func (f *fakeNodes) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("apiserver away")
	}
	if pt != types.StrategicMergePatchType || len(sub) != 1 || sub[0] != "status" {
		return nil, errors.New("not a status patch")
	}
	f.patches = append(f.patches, name+" "+string(data))
	return &corev1.Node{}, nil
}

func (f *fakeNodes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.patches)
}

func TestGuard_ReportsTransitionsOnce(t *testing.T) {
	var mu sync.Mutex
	free := uint64(100)
	nodes := &fakeNodes{}
	g, err := New(Config{Dir: "/d", MinFree: 50, NodeName: "n1", Now: func() time.Time { return t0 },
		Statfs: func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(f uint64) {
		mu.Lock()
		free = f
		mu.Unlock()
		if err := g.report(ctx, g.Check()); err != nil {
			t.Fatal(err)
		}
	}
	step(100) // first report: not full
	step(90)  // unchanged
	step(10)  // full
	if g.Refusing() == "" {
		t.Error("10 bytes free of 50: not refusing")
	}
	step(5)   // still full
	step(100) // back
	if g.Refusing() != "" {
		t.Errorf("refusing with space back: %q", g.Refusing())
	}
	if n := nodes.count(); n != 3 {
		t.Errorf("%d status patches, want 3 (start, full, back):\n%s", n, strings.Join(nodes.patches, "\n"))
	}
	// A failed report is retried on the next check.
	nodes.fail = true
	mu.Lock()
	free = 1
	mu.Unlock()
	if err := g.report(ctx, g.Check()); err == nil {
		t.Error("a failed patch reported no error")
	}
	nodes.fail = false
	step(1)
	if n := nodes.count(); n != 4 {
		t.Errorf("%d status patches after the retry, want 4", n)
	}
}

func TestGuard_StatfsFailureKeepsState(t *testing.T) {
	fail := false
	g, err := New(Config{Dir: "/d", MinFree: 50, Statfs: func(string) (uint64, error) {
		if fail {
			return 0, errors.New("EIO")
		}
		return 1, nil
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	if s := g.Check(); !s.Full {
		t.Errorf("statfs failed: state %+v, want the previous (full)", s)
	}
}

// TestGuard_RealFilesystem fills a real 4 MiB tmpfs (root): the guard
// turns full when the space left drops below MinFree and back when it is
// freed.
func TestGuard_RealFilesystem(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (mount a tmpfs)", "test")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	g, err := New(Config{Dir: dir, MinFree: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Check(); s.Full || s.Free < 3<<20 {
		t.Fatalf("empty 4 MiB tmpfs: %+v", s)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20+512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	s := g.Check()
	if !s.Full || !strings.Contains(g.Refusing(), dir) {
		t.Fatalf("3.5 MiB of 4 used, MinFree 1 MiB: %+v", s)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if s := g.Check(); s.Full {
		t.Errorf("filler removed: %+v", s)
	}
}
