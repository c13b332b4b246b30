package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleReport() *Report {
	return &Report{
		Seed: 3, Commit: "abc1234", Started: time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC), Duration: 9 * time.Minute, Nodes: 1, Residents: 2,
		Outcomes: []Outcome{
			{Fault: Fault{Seq: 1, Kind: AgentKill}, Recovery: 3 * time.Second, Respawn: 2 * time.Second},
			{Fault: Fault{Seq: 2, Kind: AgentKill}, Recovery: 5 * time.Second, Respawn: 4 * time.Second},
			{Fault: Fault{Seq: 3, Kind: AgentKill}, Recovery: 4 * time.Second, Respawn: 3 * time.Second, Violations: []string{"resident-0: QEMU pid 10 -> 11"}},
			{Fault: Fault{Seq: 4, Kind: APIServerOutage}, Recovery: 41 * time.Second},
		},
		Steps: []Step{
			{Kind: "create", VM: "churn-1", Took: 4 * time.Second},
			{Kind: "create", VM: "churn-2", Took: 6 * time.Second},
			{Kind: "pause", VM: "churn-1", Err: "not Paused within 1m0s"},
		},
		Violations: []string{"resident-0: QEMU pid 10 -> 11", "churn-1: pause: not Paused within 1m0s"},
	}
}

func TestReport_ByKind(t *testing.T) {
	got := sampleReport().ByKind()
	want := []KindStats{
		{Kind: AgentKill, Count: 3, RecoveryP50: 4 * time.Second, RecoveryMax: 5 * time.Second, RespawnP50: 3 * time.Second, Violations: 1},
		{Kind: APIServerOutage, Count: 1, RecoveryP50: 41 * time.Second, RecoveryMax: 41 * time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ByKind (-want +got):\n%s", diff)
	}
}

func TestReport_StepsByKind(t *testing.T) {
	got := sampleReport().StepsByKind()
	want := []StepStats{
		{Kind: "create", Count: 2, TookP50: 4 * time.Second, TookMax: 6 * time.Second},
		{Kind: "pause", Count: 1, Failed: 1, Examples: []string{"churn-1: not Paused within 1m0s"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StepsByKind (-want +got):\n%s", diff)
	}
}

func TestReport_Markdown(t *testing.T) {
	md := sampleReport().Markdown()
	for _, want := range []string{
		"seed 3, commit abc1234",
		"**2 invariant violation(s)**",
		"| agent-sigkill | 3 | 4s | 5s | 3s | 1 |",
		"| apiserver-outage | 1 | 41s | 41s | — | 0 |",
		"| create | 2 | 0 | 4s | 6s |",
		"| pause | 0 | 1 | 0s | 0s |",
		"- churn-1: pause: not Paused within 1m0s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	clean := &Report{Seed: 1}
	if !strings.Contains(clean.Markdown(), "No invariant was broken") {
		t.Error("a clean report does not say so")
	}
}

func TestReport_JSONRoundTrip(t *testing.T) {
	r := sampleReport()
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*r, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestReport_Migrations(t *testing.T) {
	r := sampleReport()
	if strings.Contains(r.Markdown(), "Live migrations") {
		t.Error("a run without migrations reports them")
	}
	r.Migrations = []Migration{
		{Name: "m-1", From: "n0", To: "n1", Phase: "Succeeded", Took: 3 * time.Second},
		{Name: "m-2", From: "n1", To: "n0", Phase: "Succeeded", Took: 5 * time.Second},
		{Name: "m-3", From: "n0", To: "n1", Phase: "Failed", Reason: "target agent gone", Fault: "fault 2 (agent-sigkill, at 1m0s)"},
		{Name: "m-4", From: "n1", To: "n0", Phase: "Failed", Reason: "boom"},
	}
	md := r.Markdown()
	for _, want := range []string{"4 times", "2 succeeded, 2 failed", "p50 3s, max 5s",
		"m-3 at 0s, n0 → n1, Failed after 0s: target agent gone — fault 2 (agent-sigkill, at 1m0s)",
		"m-4 at 0s, n1 → n0, Failed after 0s: boom — no fault explains it (a violation)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestFaultDuring(t *testing.T) {
	outcomes := []Outcome{{Fault: Fault{Seq: 1}, At: 10 * time.Second}, {Fault: Fault{Seq: 2}, At: 50 * time.Second}}
	if o, ok := faultDuring(outcomes, 40*time.Second, 60*time.Second); !ok || o.Seq != 2 {
		t.Errorf("faultDuring(40s, 60s) = %d, %v; want fault 2", o.Seq, ok)
	}
	if _, ok := faultDuring(outcomes, 11*time.Second, 49*time.Second); ok {
		t.Error("faultDuring(11s, 49s) found a fault")
	}
}
