package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	virtinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
)

// observer watches the benchmark's VMIs through an informer and keeps, per
// VMI, when each state key (stateKeys) was first seen and when it last
// changed, as seen by this client: the clock the latencies are taken on.
type observer struct {
	mu     sync.Mutex
	vmis   map[string]*observed // by name
	notify chan struct{}        // closed and replaced on every change
}

type observed struct {
	uid     string
	deleted bool
	state   map[string]bool
	first   map[string]time.Time
	changed map[string]time.Time
	log     []transition
}

// transition is one state key appearing or disappearing.
type transition struct {
	Key string
	On  bool
	At  time.Time
}

// stateKeys are the observable states of a VMI: its phase and the
// conditions that are True.
func stateKeys(vmi *v1.VirtualMachineInstance) map[string]bool {
	keys := map[string]bool{"phase=" + string(vmi.Status.Phase): true}
	for _, c := range vmi.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			keys[string(c.Type)] = true
		}
	}
	return keys
}

func newObserver(ctx context.Context, virt versioned.Interface, namespace string) (*observer, error) {
	o := &observer{vmis: map[string]*observed{}, notify: make(chan struct{})}
	inf := virtinformers.NewSharedInformerFactoryWithOptions(virt, 0, virtinformers.WithNamespace(namespace)).
		Kubevirt().V1().VirtualMachineInstances().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.update(obj, false) },
		UpdateFunc: func(_, obj any) { o.update(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o.update(obj, true)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("VMI observer: %w", err)
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("VMI observer: cache sync: %w", ctx.Err())
	}
	return o, nil
}

func (o *observer) update(obj any, deleted bool) {
	vmi, ok := obj.(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vmis[vmi.Name]
	if v == nil || v.uid != string(vmi.UID) {
		v = &observed{uid: string(vmi.UID), state: map[string]bool{}, first: map[string]time.Time{}, changed: map[string]time.Time{}}
		o.vmis[vmi.Name] = v
	}
	v.deleted = deleted
	keys := stateKeys(vmi)
	for k := range keys {
		if !v.state[k] {
			v.changed[k] = now
			v.log = append(v.log, transition{k, true, now})
			if _, seen := v.first[k]; !seen {
				v.first[k] = now
			}
		}
	}
	for k := range v.state {
		if !keys[k] {
			v.changed[k] = now
			v.log = append(v.log, transition{k, false, now})
		}
	}
	v.state = keys
	close(o.notify)
	o.notify = make(chan struct{})
}

// wait blocks until cond (called under the lock) holds, ctx ends or
// timeout passes.
func (o *observer) wait(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		o.mu.Lock()
		ok, ch := cond(), o.notify
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ch:
		}
	}
}

// waitFirst waits until VMI name has shown key and returns when it first
// did.
func (o *observer) waitFirst(ctx context.Context, name, key string, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := o.wait(ctx, timeout, fmt.Sprintf("VMI %s %s", name, key), func() bool {
		v := o.vmis[name]
		if v == nil {
			return false
		}
		t, ok := v.first[key]
		at = t
		return ok
	})
	return at, err
}

// waitChange waits until VMI name's key is on (or off) and changed at or
// after since, and returns when it changed.
func (o *observer) waitChange(ctx context.Context, name, key string, on bool, since time.Time, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := o.wait(ctx, timeout, fmt.Sprintf("VMI %s %s=%v", name, key, on), func() bool {
		v := o.vmis[name]
		if v == nil || v.state[key] != on {
			return false
		}
		at = v.changed[key]
		return !at.Before(since)
	})
	return at, err
}

// waitCount waits until n VMIs show key.
func (o *observer) waitCount(ctx context.Context, key string, n int, timeout time.Duration) error {
	return o.wait(ctx, timeout, fmt.Sprintf("%d VMIs %s", n, key), func() bool {
		return o.countLocked(key) >= n
	})
}

func (o *observer) countLocked(key string) int {
	n := 0
	for _, v := range o.vmis {
		if !v.deleted && v.state[key] {
			n++
		}
	}
	return n
}

// first returns when VMI name first showed key.
func (o *observer) first(name, key string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vmis[name]
	if v == nil {
		return time.Time{}, false
	}
	t, ok := v.first[key]
	return t, ok
}

// transitionsSince returns VMI name's state changes at or after t.
func (o *observer) transitionsSince(name string, t time.Time) []transition {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vmis[name]
	if v == nil {
		return nil
	}
	var out []transition
	for _, tr := range v.log {
		if !tr.At.Before(t) {
			out = append(out, tr)
		}
	}
	return out
}

// forget drops what the observer knows of deleted VMIs, so that a new VMI
// of the same name starts afresh.
func (o *observer) forget() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, v := range o.vmis {
		if v.deleted {
			delete(o.vmis, name)
		}
	}
}
