package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	virtinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/store"
)

// Index names on the informers' indexers.
const (
	byUID       = "uid"
	byCreatedBy = "createdBy"
)

// Deps are the agent's collaborators.
type Deps struct {
	Kube kubernetes.Interface
	Virt versioned.Interface
	// Store is the node's bbolt file, open for writing.
	Store *store.DB
	// KVM is the node's KVM verdict (convert.DetectKVM).
	KVM convert.KVM
	Log *slog.Logger
	// Registerer receives the agent's own metrics (reconcile and QMP
	// latency, store size); nil: not exported.
	Registerer prometheus.Registerer

	// The agent's effects on the host (effects.go); nil: the host's own
	// (HostLauncher, HostNetwork, HostQEMU, HostProcesses,
	// HostPodWatcher). The agent closes Pods when Run returns.
	Launcher  Launcher
	Network   Network
	QEMU      QEMUDialer
	Processes Processes
	Pods      PodWatcher
	// Migration is the source end of the migration channel; nil: this
	// node fails every outgoing migration.
	Migration MigrationChannel
	// Guard says when the node takes no new VMIs (node/storeguard: the
	// store's filesystem is full); nil: it always does.
	Guard Guard
}

// Guard is what the agent needs of node/storeguard.
type Guard interface {
	// Refusing returns why the node takes no new VMIs, "" when it does.
	Refusing() string
}

// Agent is the node agent. Create it with New and start it with Run.
type Agent struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	loop     *reconcile.Loop // keyed by VMI UID
	recorder record.EventRecorder
	metrics  *agentMetrics

	vmis cache.SharedIndexInformer
	// incoming are the VMIs labelled kubevirt.io/migrationTargetNodeName=<node>:
	// migrations to this node before their handoff.
	incoming cache.SharedIndexInformer
	pods     cache.SharedIndexInformer
	// proxies are the outgoing migrations' channel ends, by VMI UID.
	proxies map[string]io.Closer

	mu      sync.Mutex
	domains map[string]*domain // by VMI UID
	now     func() time.Time
	started time.Time
	ready   readiness
}

// New validates cfg and returns an agent.
func New(cfg Config, deps Deps) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Kube == nil || deps.Virt == nil || deps.Store == nil {
		return nil, errors.New("agent: Kube, Virt and Store are required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	deps = deps.withHostDefaults()
	a := &Agent{
		cfg:     cfg,
		deps:    deps,
		log:     deps.Log,
		domains: map[string]*domain{},
		proxies: map[string]io.Closer{},
		now:     time.Now,
	}
	m, err := newAgentMetrics(deps.Registerer, cfg.NodeName, deps.Store.Path(), a.connectedDomains)
	if err != nil {
		return nil, fmt.Errorf("agent: metrics: %w", err)
	}
	a.metrics = m
	a.loop = reconcile.New("vmi", reconcile.SyncFunc(a.sync), deps.Log, nil,
		reconcile.WithKeyAttr("uid"), reconcile.WithObserver(m.observeSync))
	a.vmis = vmiInformer(deps.Virt, v1.NodeNameLabel, cfg.NodeName)
	a.incoming = vmiInformer(deps.Virt, v1.MigrationTargetNodeNameLabel, cfg.NodeName)
	a.pods = informers.NewSharedInformerFactoryWithOptions(deps.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
			o.LabelSelector = labels.Set{v1.AppLabel: v1.LauncherAppValue}.String()
		})).Core().V1().Pods().Informer()
	for _, inf := range []cache.SharedIndexInformer{a.vmis, a.incoming} {
		if err := inf.AddIndexers(cache.Indexers{byUID: indexUID}); err != nil {
			return nil, fmt.Errorf("agent: VMI indexer: %w", err)
		}
	}
	if err := a.pods.AddIndexers(cache.Indexers{byCreatedBy: indexCreatedBy}); err != nil {
		return nil, fmt.Errorf("agent: pod indexer: %w", err)
	}
	return a, nil
}

// vmiInformer watches the VMIs labelled label=node.
func vmiInformer(c versioned.Interface, label, node string) cache.SharedIndexInformer {
	return virtinformers.NewSharedInformerFactoryWithOptions(c, 0,
		virtinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{label: node}.String()
		})).Kubevirt().V1().VirtualMachineInstances().Informer()
}

func indexUID(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	return []string{string(m.GetUID())}, nil
}

func indexCreatedBy(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	if uid := m.GetLabels()[v1.CreatedByLabel]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("object %T has no metadata", obj)
	}
	return m, nil
}

// enqueueVMI enqueues the VMI of an informer event by UID.
func (a *Agent) enqueueVMI(obj any) {
	if m, err := metaOf(obj); err == nil {
		a.enqueue(string(m.GetUID()))
	}
}

// enqueuePod enqueues the VMI that created a launcher pod.
func (a *Agent) enqueuePod(obj any) {
	if m, err := metaOf(obj); err == nil {
		if uid := m.GetLabels()[v1.CreatedByLabel]; uid != "" {
			a.enqueue(uid)
		}
	}
}

// enqueue is handed to domain watchers (QMP events, QEMU exit).
func (a *Agent) enqueue(uid string) { a.loop.EnqueueKey(uid) }

// forwardPodEvents enqueues the VMIs whose pod directories got news, until
// the watcher is closed.
func (a *Agent) forwardPodEvents() {
	for uid := range a.deps.Pods.Events() {
		a.enqueue(uid)
	}
}

// Run starts the informers and workers and blocks until ctx ends. Running
// QEMUs are left alone when it returns: a restarted agent re-attaches.
func (a *Agent) Run(ctx context.Context) error {
	a.started = time.Now()
	defer a.loop.ShutDown()
	defer a.closeDomains()
	defer a.deps.Pods.Close()
	a.recorder = a.newRecorder(ctx)
	go a.forwardPodEvents()

	for _, inf := range []cache.SharedIndexInformer{a.vmis, a.incoming} {
		if _, err := inf.AddEventHandler(reconcile.HandlerFunc(a.enqueueVMI)); err != nil {
			return fmt.Errorf("agent: VMI handler: %w", err)
		}
	}
	if _, err := a.pods.AddEventHandler(reconcile.HandlerFunc(a.enqueuePod)); err != nil {
		return fmt.Errorf("agent: pod handler: %w", err)
	}
	go a.vmis.Run(ctx.Done())
	go a.incoming.Run(ctx.Done())
	go a.pods.Run(ctx.Done())
	preattached := make(chan struct{})
	go func() {
		defer close(preattached)
		a.preattach(ctx, a.deps.Store.LiveUIDs())
	}()
	defer func() { <-preattached }() // before closeDomains: nothing attaches after it
	if !waitSynced(ctx, a.vmis.HasSynced, a.incoming.HasSynced, a.pods.HasSynced) {
		return fmt.Errorf("agent: informer sync: %w", ctx.Err())
	}
	// The workers start below: no sync ends before readiness knows them.
	uids := a.enqueueRecords()
	a.ready.start(uids)
	a.log.Info("agent started", "records", len(uids), "node", a.cfg.NodeName, "kvm", a.deps.KVM.Usable, "kvmReason", a.deps.KVM.Reason)

	workersDone := make(chan struct{})
	go func() {
		defer close(workersDone)
		a.loop.Run(ctx, a.cfg.Workers)
	}()
	a.resyncLoop(ctx)
	<-workersDone // the workers finish their current key
	return nil
}

// cacheSyncPoll is how often Run checks whether its informers have listed:
// client-go's WaitForCacheSync checks every 100 ms, a tenth of what a
// restart may take to re-adopt every VM.
const cacheSyncPoll = 5 * time.Millisecond

// waitSynced waits until every informer has synced; false when ctx ended
// first.
func waitSynced(ctx context.Context, synced ...cache.InformerSynced) bool {
	t := time.NewTicker(cacheSyncPoll)
	defer t.Stop()
	for {
		if !slices.ContainsFunc(synced, func(s cache.InformerSynced) bool { return !s() }) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// enqueueRecords enqueues every live record and returns their UIDs:
// re-adoption after a restart, and the safety net for records whose VMI
// vanished. It reads no record: the tombstones a node keeps for a day
// cost nothing here.
func (a *Agent) enqueueRecords() []string {
	uids := a.deps.Store.LiveUIDs()
	for _, uid := range uids {
		a.enqueue(uid)
	}
	return uids
}

// resyncLoop periodically enqueues every VMI and record and prunes old
// tombstones, until ctx ends.
func (a *Agent) resyncLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, obj := range append(a.vmis.GetStore().List(), a.incoming.GetStore().List()...) {
			a.enqueueVMI(obj)
		}
		a.enqueueRecords()
		if gone, err := a.deps.Store.Prune(ctx, a.now()); err != nil {
			a.log.Error("prune records", "err", err)
		} else if len(gone) > 0 {
			a.log.Info("pruned records", "count", len(gone))
		}
	}
}

// domain returns the runtime of uid, creating it.
func (a *Agent) domain(uid string) *domain {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.domains[uid]
	if !ok {
		d = &domain{uid: uid, enqueue: a.enqueue, log: a.log.With("uid", uid),
			qemu: a.deps.QEMU, procs: a.deps.Processes, net: a.deps.Network}
		a.domains[uid] = d
	}
	return d
}

// connectedDomains counts the domains with an open QMP connection.
func (a *Agent) connectedDomains() int {
	a.mu.Lock()
	ds := make([]*domain, 0, len(a.domains))
	for _, d := range a.domains {
		ds = append(ds, d)
	}
	a.mu.Unlock()
	n := 0
	for _, d := range ds {
		if d.view().QMPConnected {
			n++
		}
	}
	return n
}

// dropDomain closes and forgets the runtime of uid and its outgoing
// migration channel.
func (a *Agent) dropDomain(uid string) {
	a.closeProxy(uid)
	a.deps.Pods.Unwatch(uid)
	a.mu.Lock()
	d := a.domains[uid]
	delete(a.domains, uid)
	a.mu.Unlock()
	if d != nil {
		d.close()
	}
}

// closeDomains closes every connection without touching QEMU.
func (a *Agent) closeDomains() {
	a.mu.Lock()
	ds, ps := a.domains, a.proxies
	a.domains, a.proxies = map[string]*domain{}, map[string]io.Closer{}
	a.mu.Unlock()
	for _, d := range ds {
		d.close()
	}
	for _, p := range ps {
		go p.Close() // drains in the background; the process exit cuts it
	}
}

// podOf returns the launcher pod of o's VMI on this node. Several may
// exist for one VMI UID (a completed source pod after A→B→A, a migration's
// target pod): the record's pod when there is a live record; for an
// incoming migration its target pod (label kubevirt.io/migrationJobUID);
// else a pod that is neither completed nor deleting, if any.
func (a *Agent) podOf(o *Observation) *corev1.Pod {
	objs, err := a.pods.GetIndexer().ByIndex(byCreatedBy, o.UID)
	if err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	if p := pickPod(pods, o); p != nil {
		return p.DeepCopy()
	}
	return nil
}

// pickPod chooses o's launcher pod among pods (see podOf). It is pure.
func pickPod(pods []*corev1.Pod, o *Observation) *corev1.Pod {
	if o.liveRecord() && o.Record.PodUID != "" {
		for _, p := range pods {
			if string(p.UID) == o.Record.PodUID {
				return p
			}
		}
	}
	if ms := o.incoming(); ms != nil {
		for _, p := range pods {
			if p.Labels[v1.MigrationJobUIDLabel] == string(ms.MigrationUID) {
				return p
			}
		}
		return nil
	}
	var best *corev1.Pod
	score := func(p *corev1.Pod) int {
		n := 0
		if p.DeletionTimestamp == nil {
			n += 2
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n += 4
		}
		return n
	}
	for _, p := range pods {
		if best == nil || score(p) > score(best) {
			best = p
		}
	}
	return best
}

// vmiOf returns a copy of the VMI with the given UID from the caches: the
// node's VMIs first, then the incoming migrations'. A VMI in both (during
// the handoff) is taken from the newer object.
func (a *Agent) vmiOf(uid string) *v1.VirtualMachineInstance {
	var found *v1.VirtualMachineInstance
	for _, inf := range []cache.SharedIndexInformer{a.vmis, a.incoming} {
		objs, err := inf.GetIndexer().ByIndex(byUID, uid)
		if err != nil || len(objs) == 0 {
			continue
		}
		vmi, ok := objs[0].(*v1.VirtualMachineInstance)
		if !ok {
			continue
		}
		if found == nil || newerRV(vmi.ResourceVersion, found.ResourceVersion) {
			found = vmi
		}
	}
	if found == nil {
		return nil
	}
	return found.DeepCopy()
}

// newerRV compares two resource versions of one object from the same API
// server as decimal numbers (etcd revisions): the longer, else the larger.
func newerRV(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}
