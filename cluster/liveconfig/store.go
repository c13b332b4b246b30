package liveconfig

import (
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Event reasons.
const (
	ReasonApplied = "ConfigurationApplied"
	ReasonRefused = "ConfigurationRefused"
	ReasonIgnored = "KubeVirtIgnored"
)

// Compute turns the configuration objects into a configuration; either
// may be nil (not there). An error refuses the change.
type Compute[T any] func(cm *corev1.ConfigMap, kv *v1.KubeVirt) (T, error)

// ConfigMapGetter finds the ConfigMap by name (a namespace lister).
type ConfigMapGetter interface {
	Get(name string) (*corev1.ConfigMap, error)
}

// KubeVirtLister lists the KubeVirt resources of the namespace.
type KubeVirtLister interface {
	List(selector labels.Selector) ([]*v1.KubeVirt, error)
}

// Deps are the store's collaborators.
type Deps[T any] struct {
	// ConfigMapName names the ConfigMap ("" means none is watched).
	ConfigMapName string
	ConfigMaps    ConfigMapGetter
	KubeVirts     KubeVirtLister
	Compute       Compute[T]
	// Synced reports whether the informers behind ConfigMaps and
	// KubeVirts have listed everything (nil: always). Before that a
	// lister may lack an object that exists, and Refresh does nothing.
	Synced   func() bool
	Recorder record.EventRecorder
	Log      *slog.Logger
}

// Store holds the configuration in force.
type Store[T any] struct {
	d   Deps[T]
	cur atomic.Pointer[T]
	mu  sync.Mutex // one Refresh at a time
	// onChange run after each change is put in force.
	onChange []func()
	// ignored are the KubeVirts already told they are ignored (by UID).
	ignored map[string]bool
}

// New returns a store whose configuration is initial until the first
// Refresh.
func New[T any](initial T, d Deps[T]) *Store[T] {
	s := &Store[T]{d: d, ignored: map[string]bool{}}
	s.cur.Store(&initial)
	return s
}

// OnChange adds f to what runs after each change is put in force (e.g.
// requeueing what the configuration decides for existing objects). Call
// it before the informers start.
func (s *Store[T]) OnChange(f func()) { s.onChange = append(s.onChange, f) }

// Current is the configuration in force.
func (s *Store[T]) Current() T { return *s.cur.Load() }

// Handler refreshes the store on every event of the informers it is added
// to (the ConfigMap's and the KubeVirt's).
func (s *Store[T]) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.Refresh() },
		UpdateFunc: func(any, any) { s.Refresh() },
		DeleteFunc: func(any) { s.Refresh() },
	}
}

func (s *Store[T]) objects() (*corev1.ConfigMap, *v1.KubeVirt, error) {
	cm, err := s.configMap()
	if err != nil {
		return nil, nil, fmt.Errorf("read the configuration ConfigMap: %w", err)
	}
	kv, err := s.kubeVirt()
	if err != nil {
		return nil, nil, fmt.Errorf("list KubeVirt resources: %w", err)
	}
	return cm, kv, nil
}

// Refresh recomputes the configuration from the listers' current objects
// and swaps it in when it computes and differs. It does nothing until the
// informers have synced: the owner calls it once they have.
func (s *Store[T]) Refresh() {
	if s.d.Synced != nil && !s.d.Synced() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cm, kv, err := s.objects()
	if err != nil {
		s.d.Log.Error("keeping the configuration in force", "err", err)
		return
	}
	next, err := s.d.Compute(cm, kv)
	if err != nil {
		s.d.Log.Warn("configuration change refused; keeping the configuration in force", "err", err)
		s.event(source(cm, kv), corev1.EventTypeWarning, ReasonRefused, "Configuration change refused, the previous configuration stays in force: %v", err)
		return
	}
	if reflect.DeepEqual(next, s.Current()) {
		return
	}
	s.cur.Store(&next)
	s.d.Log.Info("configuration in force", "config", fmt.Sprintf("%+v", next), "kubevirt", name(kv), "configMap", name(cm))
	if kv != nil {
		s.event(kv, corev1.EventTypeNormal, ReasonApplied, "Configuration of generation %d in force for new VMIs and migrations", kv.Generation)
	}
	if cm != nil {
		s.event(cm, corev1.EventTypeNormal, ReasonApplied, "Configuration in force for new VMIs and migrations")
	}
	for _, f := range s.onChange {
		f()
	}
}

func (s *Store[T]) configMap() (*corev1.ConfigMap, error) {
	if s.d.ConfigMapName == "" || s.d.ConfigMaps == nil {
		return nil, nil
	}
	cm, err := s.d.ConfigMaps.Get(s.d.ConfigMapName)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// kubeVirt is the KubeVirt that configures the cluster (Select); the
// others get a Warning event once.
func (s *Store[T]) kubeVirt() (*v1.KubeVirt, error) {
	if s.d.KubeVirts == nil {
		return nil, nil
	}
	all, err := s.d.KubeVirts.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	chosen, others := Select(all)
	for _, other := range others {
		if !s.ignored[string(other.UID)] {
			s.ignored[string(other.UID)] = true
			s.event(other, corev1.EventTypeWarning, ReasonIgnored,
				"Ignored: KubeVirt %s/%s configures this cluster, and a cluster has one KubeVirt", chosen.Namespace, chosen.Name)
		}
	}
	return chosen, nil
}

// Select picks the KubeVirt that configures the cluster among all: the
// oldest one not being deleted, ties broken by name. others are the rest
// not being deleted. It is pure.
func Select(all []*v1.KubeVirt) (chosen *v1.KubeVirt, others []*v1.KubeVirt) {
	kvs := make([]*v1.KubeVirt, 0, len(all))
	for _, kv := range all {
		if kv.DeletionTimestamp == nil {
			kvs = append(kvs, kv)
		}
	}
	if len(kvs) == 0 {
		return nil, nil
	}
	sort.Slice(kvs, func(i, j int) bool {
		a, b := kvs[i], kvs[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return kvs[0], kvs[1:]
}

func (s *Store[T]) event(obj runtime.Object, typ, reason, format string, args ...any) {
	if s.d.Recorder != nil && obj != nil && !reflect.ValueOf(obj).IsNil() {
		s.d.Recorder.Eventf(obj, typ, reason, format, args...)
	}
}

// source is the object a refused change is reported on: the ConfigMap
// when there is one (its values are parsed here; the KubeVirt's are
// checked by the API server's schema before they are stored), else the
// KubeVirt.
func source(cm *corev1.ConfigMap, kv *v1.KubeVirt) runtime.Object {
	if cm != nil {
		return cm
	}
	if kv != nil {
		return kv
	}
	return nil
}

func name(o interface{ GetName() string }) string {
	if o == nil || reflect.ValueOf(o).IsNil() {
		return ""
	}
	return o.GetName()
}
