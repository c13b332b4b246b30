package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Outcome is what one injected fault did.
type Outcome struct {
	Fault
	// At is when the fault was injected, from the start of the run.
	At time.Duration `json:"at"`
	// Target names what was hit: a host pid, a pod, a daemon.
	Target string `json:"target"`
	// Recovery is from the fault until what it hit served again (the
	// agent ready, the VM's new VMI Running, a new leader, ...).
	Recovery time.Duration `json:"recovery"`
	// Respawn is the part of Recovery that is the kubelet's, for an
	// agent kill: from the kill until the new agent process exists (the
	// rest is the agent starting and serving its node API).
	Respawn time.Duration `json:"respawn,omitempty"`
	// Detail breaks the recovery down where it has steps (the victim's
	// VMI final, then its successor Running).
	Detail string `json:"detail,omitempty"`
	// Violations are the invariants found broken after it.
	Violations []string `json:"violations,omitempty"`
}

// Step is one finished workload step (create, pause, unpause, stop,
// start, delete) and how long it took to take effect.
type Step struct {
	// At is when the step began, from the start of the run.
	At   time.Duration `json:"at"`
	Kind string        `json:"kind"`
	VM   string        `json:"vm"`
	Took time.Duration `json:"took"`
	Err  string        `json:"err,omitempty"`
}

// Migration is one live migration of the migrant VM.
type Migration struct {
	// At is when it was requested, from the start of the run.
	At    time.Duration `json:"at"`
	Name  string        `json:"name"`
	From  string        `json:"from"`
	To    string        `json:"to,omitempty"`
	Phase string        `json:"phase"`
	// Took is from the request until the migration ended.
	Took   time.Duration `json:"took"`
	Reason string        `json:"reason,omitempty"`
	// Fault is the fault that explains a failure (a failure without one
	// is a violation).
	Fault string `json:"fault,omitempty"`
}

// Report is a chaos run's record, written as docs/chaos.md and
// docs/chaos.json by make chaos.
type Report struct {
	Seed     int64         `json:"seed"`
	Commit   string        `json:"commit"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	Nodes    int           `json:"nodes"`
	// Residents is how many VMs ran through the whole run untouched by
	// any fault aimed at a VM.
	Residents int `json:"residents"`
	// Probes and ProbeFailures count the HTTP probes of the residents'
	// guests; GuestOutageMax is the longest a resident's guest did not
	// answer.
	Probes         int           `json:"probes"`
	ProbeFailures  int           `json:"probeFailures"`
	GuestOutageMax time.Duration `json:"guestOutageMax"`
	// ConsoleOpens counts the residents' serial consoles opened through
	// the cluster and answering (each agent restart ends the streams);
	// ConsoleOutageMax is the longest a resident went without one.
	ConsoleOpens     int           `json:"consoleOpens"`
	ConsoleOutageMax time.Duration `json:"consoleOutageMax"`
	Outcomes         []Outcome     `json:"outcomes"`
	Steps            []Step        `json:"steps"`
	// Migrations are the migrant's live migrations (two nodes or more).
	Migrations []Migration `json:"migrations,omitempty"`
	// Violations are every broken invariant: the faults', the
	// workload's and the final checks'.
	Violations []string `json:"violations,omitempty"`
}

// KindStats summarize the outcomes of one fault kind.
type KindStats struct {
	Kind        Kind
	Count       int
	RecoveryP50 time.Duration
	RecoveryMax time.Duration
	// RespawnP50 is the median of the outcomes' Respawn (zero when the
	// kind has none).
	RespawnP50 time.Duration
	Violations int
}

// ByKind summarizes the outcomes per fault kind, in Kinds order, leaving
// out kinds that were not injected.
func (r *Report) ByKind() []KindStats {
	var out []KindStats
	for _, k := range Kinds {
		var rec, respawn []time.Duration
		s := KindStats{Kind: k}
		for _, o := range r.Outcomes {
			if o.Kind == k {
				s.Count++
				rec = append(rec, o.Recovery)
				s.Violations += len(o.Violations)
				if o.Respawn > 0 {
					respawn = append(respawn, o.Respawn)
				}
			}
		}
		if s.Count == 0 {
			continue
		}
		s.RecoveryP50, s.RecoveryMax = median(rec), slices.Max(rec)
		if len(respawn) > 0 {
			s.RespawnP50 = median(respawn)
		}
		out = append(out, s)
	}
	return out
}

// StepStats summarize the workload's steps of one kind.
type StepStats struct {
	Kind     string
	Count    int
	Failed   int
	TookP50  time.Duration
	TookMax  time.Duration
	Examples []string // the first failures
}

// StepsByKind summarizes the workload's steps per kind, sorted by kind.
func (r *Report) StepsByKind() []StepStats {
	m := map[string]*StepStats{}
	took := map[string][]time.Duration{}
	for _, s := range r.Steps {
		st := m[s.Kind]
		if st == nil {
			st = &StepStats{Kind: s.Kind}
			m[s.Kind] = st
		}
		st.Count++
		if s.Err != "" {
			st.Failed++
			if len(st.Examples) < 3 {
				st.Examples = append(st.Examples, s.VM+": "+s.Err)
			}
			continue
		}
		took[s.Kind] = append(took[s.Kind], s.Took)
	}
	var out []StepStats
	for _, st := range m {
		if d := took[st.Kind]; len(d) > 0 {
			st.TookP50, st.TookMax = median(d), slices.Max(d)
		}
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b StepStats) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// JSON is the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Markdown is the report for people: the run, the faults per kind, the
// workload's steps and every violation.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos run\n\n")
	fmt.Fprintf(&b, "`make chaos` (e2e/chaos): seed %d, commit %s, started %s, %v, %d node(s), %d resident VM(s).\n\n",
		r.Seed, r.Commit, r.Started.UTC().Format(time.RFC3339), r.Duration.Round(time.Second), r.Nodes, r.Residents)
	b.WriteString(invariantsText)
	if len(r.Violations) == 0 {
		b.WriteString("**No invariant was broken.**\n\n")
	} else {
		fmt.Fprintf(&b, "**%d invariant violation(s)**, listed at the end.\n\n", len(r.Violations))
	}
	fmt.Fprintf(&b, "The residents' guests answered %d of %d HTTP probes (every %v each, through the pod IP and masquerade); "+
		"the longest a resident did not answer: %v.\n\n", r.Probes-r.ProbeFailures, r.Probes, probeEvery, r.GuestOutageMax.Round(10*time.Millisecond))
	if r.ConsoleOpens > 0 {
		fmt.Fprintf(&b, "Their serial consoles, kept open through the cluster (kube-apiserver → nodevirt-api → agent) as `virtctl console` "+
			"does and reopened whenever a fault ended the stream, answered %d times; the longest a resident went without one: %v.\n\n",
			r.ConsoleOpens, r.ConsoleOutageMax.Round(10*time.Millisecond))
	}
	b.WriteString("## Faults\n\n| fault | injected | recovery p50 | recovery max | of which the kubelet's respawn, p50 | violations |\n|---|---|---|---|---|---|\n")
	for _, s := range r.ByKind() {
		respawn := "—"
		if s.RespawnP50 > 0 {
			respawn = s.RespawnP50.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %s | %d |\n", s.Kind, s.Count, s.RecoveryP50.Round(10*time.Millisecond),
			s.RecoveryMax.Round(10*time.Millisecond), respawn, s.Violations)
	}
	var details []string
	for _, o := range r.Outcomes {
		if o.Detail != "" {
			details = append(details, fmt.Sprintf("- fault %d (%s, at %v): %s\n", o.Seq, o.Kind, o.At.Round(time.Second), o.Detail))
		}
	}
	if len(details) > 0 {
		b.WriteString("\n" + strings.Join(details, ""))
	}
	b.WriteString("\nThe floor of an agent kill's recovery is the kubelet's respawn of its container (its crash-loop backoff, " +
		"capped at 2 s on the local cluster, and its pod worker's retry); the rest is the agent's start.\n")
	b.WriteString("\nRecovery: from the fault until what it hit serves again — the restarted agent answering on its node API socket, the victim VM's successor booted, " +
		"a controller leader renewing its lease, the node Ready, kube-apiserver ready.\n\n")
	b.WriteString("## Workload\n\n| step | done | failed | took p50 | took max |\n|---|---|---|---|---|\n")
	for _, s := range r.StepsByKind() {
		fmt.Fprintf(&b, "| %s | %d | %d | %v | %v |\n", s.Kind, s.Count-s.Failed, s.Failed,
			s.TookP50.Round(10*time.Millisecond), s.TookMax.Round(10*time.Millisecond))
	}
	b.WriteString("\nA step's time runs from the request until it took effect in the API server (create: VMI Running; " +
		"pause: Paused=True; stop and delete: the VMI gone), faults included.\n")
	b.WriteString(r.migrationsMarkdown())
	if len(r.Violations) > 0 {
		b.WriteString("\n## Violations\n\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "- %s\n", v)
		}
	}
	return b.String()
}

// invariantsText says what the run checks, for the report's readers.
const invariantsText = `The faults are drawn from the seed (same seed, same faults, gaps and order) and
injected while the workload runs, so they land at random points of its steps. After
every fault the harness checks, and counts as a violation when broken:

- every resident VM (no fault aims at it) runs in the same VMI and the same QEMU
  process, is not paused, and its guest booted once (its serial console); its guest,
  writing its disk all along, answers HTTP through its pod IP — never silent for
  more than 5 s; its serial console through the cluster works again within 2 minutes
  of a fault ending it;
- the victim VM, whose launcher or QEMU a fault killed, ends that VMI and boots a
  successor (runStrategy Always, after KubeVirt's crash-loop backoff);
- the migrant VM, live-migrated between the two nodes again and again, keeps its VMI
  Running and its guest (the same kernel boot ID, read through its console) after
  every migration; each migration ends within the controller's own bounds (its target
  pod running within 2 minutes, the target's domain ready within progressTimeout after
  that) and a minute, and one that fails must have a fault injected while it ran (or
  in the minute before) to explain it;
- the agent's records agree with the API server within a minute: no live record of a
  VMI that is gone or final, no Running VMI of the node without a live record;
- the node is never marked unschedulable (a SIGKILLed agent is back long before the
  heartbeat threshold), except while a store-full fault holds the agent's store
  filesystem full: then it must refuse new VMIs (schedulable=false, Node condition
  NodevirtStoreFull True) within a minute and take them again once freed;
- every workload step takes effect within its deadline (4 min, faults included) — no
  stuck finalizer;
- at the end, once every VM is deleted: no VMI, no QEMU, no live record, no mount
  and no directory (sockets, serial log, volumes) of any launcher pod the run saw,
  and no bridge, tap or nodevirt nftables table in any pod network namespace or
  the host's.

`

// probeEvery is the pause between two HTTP probes of a resident guest.
const probeEvery = 250 * time.Millisecond

// median of d (not empty), the lower middle for an even count.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// migrationsMarkdown summarizes the migrant's migrations: how many ended
// how, how long they took, and each failure with the fault explaining it.
func (r *Report) migrationsMarkdown() string {
	if len(r.Migrations) == 0 {
		return ""
	}
	var b strings.Builder
	var took []time.Duration
	var failed []Migration
	for _, m := range r.Migrations {
		if m.Phase == "Succeeded" {
			took = append(took, m.Took)
		} else {
			failed = append(failed, m)
		}
	}
	fmt.Fprintf(&b, "\n## Live migrations\n\nThe migrant VM was live-migrated between the nodes %d times, through the faults: "+
		"%d succeeded, %d failed.", len(r.Migrations), len(took), len(failed))
	if len(took) > 0 {
		fmt.Fprintf(&b, " A successful one took p50 %v, max %v (request to Succeeded).", median(took).Round(10*time.Millisecond),
			slices.Max(took).Round(10*time.Millisecond))
	}
	b.WriteString(" Its guest never rebooted and its VMI stayed the same and Running throughout (checked after each).\n")
	for _, m := range failed {
		why := m.Fault
		if why == "" {
			why = "no fault explains it (a violation)"
		}
		fmt.Fprintf(&b, "- %s at %v, %s → %s, %s after %v: %s — %s\n", m.Name, m.At.Round(time.Second), m.From, m.To, m.Phase,
			m.Took.Round(10*time.Millisecond), m.Reason, why)
	}
	return b.String()
}
