package liveconfig

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

type fakeConfigMaps struct{ cm *corev1.ConfigMap }

func (f *fakeConfigMaps) Get(name string) (*corev1.ConfigMap, error) {
	if f.cm == nil || f.cm.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return f.cm, nil
}

type fakeKubeVirts struct{ kvs []*v1.KubeVirt }

func (f *fakeKubeVirts) List(labels.Selector) ([]*v1.KubeVirt, error) { return f.kvs, nil }

func kubeVirt(name string, created time.Time) *v1.KubeVirt {
	return &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "nodevirt", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(created)}}
}

// compute is "<configmap value>/<kubevirt name>"; a ConfigMap value "bad"
// does not compute.
func compute(cm *corev1.ConfigMap, kv *v1.KubeVirt) (string, error) {
	var v, k string
	if cm != nil {
		v = cm.Data["v"]
	}
	if v == "bad" {
		return "", errors.New(`key v: "bad" does not parse`)
	}
	if kv != nil {
		k = kv.Name
	}
	return v + "/" + k, nil
}

func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestStore(t *testing.T) {
	cms, kvs := &fakeConfigMaps{}, &fakeKubeVirts{}
	rec := record.NewFakeRecorder(100)
	s := New("initial", Deps[string]{ConfigMapName: "cfg", ConfigMaps: cms, KubeVirts: kvs, Compute: compute, Recorder: rec,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if got := s.Current(); got != "initial" {
		t.Fatalf("before any refresh: %q", got)
	}

	s.Refresh()
	if got := s.Current(); got != "/" {
		t.Errorf("no objects: %q, want the flags' %q", got, "/")
	}

	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cms.cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "nodevirt"}, Data: map[string]string{"v": "a"}}
	kvs.kvs = []*v1.KubeVirt{kubeVirt("kubevirt", t0)}
	s.Refresh()
	if got := s.Current(); got != "a/kubevirt" {
		t.Errorf("both objects: %q", got)
	}
	if ev := events(rec); len(ev) != 2 || !strings.Contains(ev[0], ReasonApplied) {
		t.Errorf("events after a change: %q, want two %s", ev, ReasonApplied)
	}

	// A change that does not compute is refused; the configuration stays.
	cms.cm.Data["v"] = "bad"
	s.Refresh()
	if got := s.Current(); got != "a/kubevirt" {
		t.Errorf("after a refused change: %q, want the previous one", got)
	}
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+ReasonRefused) || !strings.Contains(ev[0], `key v`) {
		t.Errorf("events after a refused change: %q", ev)
	}

	// No change, no event.
	cms.cm.Data["v"] = "a"
	s.Refresh()
	events(rec)
	s.Refresh()
	if ev := events(rec); len(ev) != 0 {
		t.Errorf("events without a change: %q", ev)
	}

	// A second, newer KubeVirt is ignored, and told so once.
	kvs.kvs = append(kvs.kvs, kubeVirt("second", t0.Add(time.Hour)))
	s.Refresh()
	s.Refresh()
	if got := s.Current(); got != "a/kubevirt" {
		t.Errorf("with a second KubeVirt: %q, want the first's", got)
	}
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+ReasonIgnored) {
		t.Errorf("events for the second KubeVirt: %q", ev)
	}
}

func TestSelect(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	deleting := kubeVirt("old", t0.Add(-time.Hour))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	b, a, c := kubeVirt("b", t0), kubeVirt("a", t0), kubeVirt("c", t0.Add(time.Minute))
	chosen, others := Select([]*v1.KubeVirt{c, deleting, b, a})
	if chosen != a || len(others) != 2 || others[0] != b || others[1] != c {
		t.Errorf("Select = %v, %v; want a, then b and c (the deleting one left out)", chosen.Name, others)
	}
	if chosen, others := Select([]*v1.KubeVirt{deleting}); chosen != nil || others != nil {
		t.Errorf("only a deleting one: %v, %v; want none", chosen, others)
	}
}

func TestStore_NothingBeforeSync(t *testing.T) {
	synced := false
	cms := &fakeConfigMaps{cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"v": "a"}}}
	s := New("a/", Deps[string]{ConfigMapName: "cfg", ConfigMaps: cms, KubeVirts: &fakeKubeVirts{}, Compute: compute,
		Synced: func() bool { return synced }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Before the sync a lister may lack the ConfigMap: no refresh.
	cms.cm = nil
	s.Refresh()
	if got := s.Current(); got != "a/" {
		t.Errorf("refresh before the sync changed the configuration to %q", got)
	}
	synced = true
	s.Refresh()
	if got := s.Current(); got != "/" {
		t.Errorf("after the sync: %q, want %q", got, "/")
	}
}
