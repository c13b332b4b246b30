package migration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Bench measures migrations (make bench-migration; a smoke run in every
// suite run): guests of each size, idle and dirtying their memory,
// migrated back and forth; for each hop the total (VMIM created ->
// Succeeded), QEMU's total-time, and the downtime twice: as the guest's
// clients see it (the longest gap of HTTP answers) and as the source
// agent recorded it. Each case is set beside its floor measured in the
// same run (floor_test.go): the same guest between two bare QEMUs.
// NODEVIRT_MIGRATION_BENCH=full runs the real sizes and writes the report
// to docs/migration-benchmarks.md.

// benchSettings are the sizes of one run.
type benchSettings struct {
	full     bool
	memories []string
	runs     int
	drainVMs int // 0: no drain case (the Drain scenario measures two)
}

func benchSettingsFromEnv() benchSettings {
	if os.Getenv("NODEVIRT_MIGRATION_BENCH") == "full" {
		return benchSettings{full: true, memories: []string{"256Mi", "1Gi"}, runs: 10, drainVMs: 4}
	}
	return benchSettings{memories: []string{"256Mi"}, runs: 1}
}

// benchCase is one guest size and workload with its samples.
type benchCase struct {
	Memory   string `json:"memory"`
	Workload string `json:"workload"` // idle or dirty
	Mode     string `json:"mode"`     // migrationState.mode
	// nodevirt, one sample per hop
	Total        []time.Duration `json:"total"`         // VMIM created -> Succeeded seen
	QEMUTotal    []time.Duration `json:"qemuTotal"`     // the source's query-migrate total-time
	GuestDown    []time.Duration `json:"guestDowntime"` // longest gap of HTTP answers
	RecordedDown []time.Duration `json:"recordedDowntime"`
	// the floor, one sample per bare hop
	FloorMode  string          `json:"floorMode"`
	FloorTotal []time.Duration `json:"floorTotal"`
	FloorDown  []time.Duration `json:"floorDowntime"`
}

func testBench(t *testing.T, s *suite) {
	cfg := benchSettingsFromEnv()
	var cases []*benchCase
	for _, mem := range cfg.memories {
		for _, dirty := range []bool{false, true} {
			c := &benchCase{Memory: mem, Workload: map[bool]string{false: "idle", true: "dirty"}[dirty]}
			cases = append(cases, c)
			t.Run(mem+"-"+c.Workload, func(t *testing.T) {
				s.benchCase(t, cfg, c, dirty)
				s.benchFloor(t, cfg, c, dirty)
			})
		}
	}
	var drain time.Duration
	if cfg.drainVMs > 0 {
		t.Run(fmt.Sprintf("Drain%d", cfg.drainVMs), func(t *testing.T) { drain = s.drainVMs(t, cfg.drainVMs) })
	}
	report := benchReport(cases, cfg, drain, len(s.cluster.Nodes))
	t.Log("\n" + report)
	if cfg.full && !t.Failed() {
		writeBenchReport(t, s.root, report, cases)
	}
}

// benchCase migrates one guest cfg.runs times, alternating nodes.
func (s *suite) benchCase(t *testing.T, cfg benchSettings, c *benchCase, dirty bool) {
	name := "bench-" + strings.ToLower(c.Memory) + "-" + c.Workload
	s.startVM(t, vmSpec{name: name, dirty: dirty, memory: c.Memory})
	for range cfg.runs {
		h := s.migrate(t, name)
		c.Total = append(c.Total, h.total)
		c.GuestDown = append(c.GuestDown, h.downtime)
		c.Mode = h.vmi.Status.MigrationState.Mode
		rec := s.sourceRecord(t, h)
		c.QEMUTotal = append(c.QEMUTotal, time.Duration(rec.TotalMs)*time.Millisecond)
		c.RecordedDown = append(c.RecordedDown, time.Duration(rec.DowntimeMs)*time.Millisecond)
	}
	s.deleteVM(t, name)
}

// benchFloor migrates the same guest between bare QEMUs cfg.runs times.
func (s *suite) benchFloor(t *testing.T, cfg benchSettings, c *benchCase, dirty bool) {
	q := resource.MustParse(c.Memory)
	mib := int(q.Value() >> 20)
	vm := startBare(t, mib, false)
	vm.startWorkload(t, dirty)
	for range cfg.runs {
		var h floorHop
		h, vm = migrateBare(t, vm, mib)
		c.FloorMode = h.mode
		c.FloorTotal = append(c.FloorTotal, h.total)
		c.FloorDown = append(c.FloorDown, h.downtime)
	}
}

// recordMigration is the part of an agent record's migration the bench
// reads (store.Migration).
type recordMigration struct {
	UID        string `json:"uid"`
	Role       string `json:"role"`
	Mode       string `json:"mode"`
	DowntimeMs int64  `json:"downtimeMs"`
	TotalMs    int64  `json:"totalMs"`
}

// sourceRecord reads hop h's migration from the source agent's record
// (a tombstone by now) through its node API.
func (s *suite) sourceRecord(t *testing.T, h hop) recordMigration {
	t.Helper()
	code, body, err := s.nodeAPI(t.Context(), t, h.from, http.MethodGet, "/nodectl/v1/domain?vmi="+h.vmi.Metadata.UID, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("the source record of %s on %s: %v HTTP %d %s", h.vmi.Metadata.Name, h.from, err, code, body)
	}
	var rec struct {
		Migration *recordMigration `json:"migration"`
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	m := rec.Migration
	if m == nil || m.Role != "source" || m.UID != h.vmi.Status.MigrationState.MigrationUID || m.TotalMs == 0 {
		t.Fatalf("the source record of %s on %s has no figures of migration %s: %s", h.vmi.Metadata.Name, h.from,
			h.vmi.Status.MigrationState.MigrationUID, body)
	}
	return *m
}

// drainVMs starts n LiveMigrate VMs on the first node and drains it: the
// time kubectl drain takes to empty it.
func (s *suite) drainVMs(t *testing.T, n int) time.Duration {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("bench-drain-%d", i))
	}
	return s.drain(t, names)
}

// p50 and maximum of samples.
func p50max(d []time.Duration) (time.Duration, time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

func benchReport(cases []*benchCase, cfg benchSettings, drain time.Duration, nodes int) string {
	var b strings.Builder
	ms := func(d []time.Duration) string {
		p, m := p50max(d)
		return fmt.Sprintf("%d / %d", p.Milliseconds(), m.Milliseconds())
	}
	fmt.Fprintf(&b, "Live migration on the local cluster (%d nodes, one host, %s), %d migrations per case, p50 / max in ms.\n\n",
		nodes, strings.Join(floorAccel()[:2], " "), cfg.runs)
	b.WriteString("| guest | mode | total (VMIM created → Succeeded) | QEMU total-time | downtime, clients' view | downtime, agent's record | floor mode | floor total-time | floor downtime |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cases {
		fmt.Fprintf(&b, "| %s %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Memory, c.Workload, c.Mode,
			ms(c.Total), ms(c.QEMUTotal), ms(c.GuestDown), ms(c.RecordedDown), c.FloorMode, ms(c.FloorTotal), ms(c.FloorDown))
	}
	if drain > 0 {
		fmt.Fprintf(&b, "\nkubectl drain of a node with %d LiveMigrate VMs (128 MiB, dirtying): %d ms until the node was empty.\n",
			cfg.drainVMs, drain.Milliseconds())
	}
	return b.String()
}

// writeBenchReport writes docs/migration-benchmarks.md and .json.
func writeBenchReport(t *testing.T, root, table string, cases []*benchCase) {
	t.Helper()
	md := "# Live migration benchmarks\n\n" +
		"Written by `make bench-migration` (e2e/migration, scenario Bench) on " + time.Now().UTC().Format(time.DateOnly) + ".\n" +
		"The floor is the same guest migrated between two bare QEMU processes on the same host, in the same run.\n" +
		"Under TCG the agent stops the guest for the transfer (mode Paused; see node/agent/migrationmode.go), and so does the floor.\n\n" +
		table
	if err := os.WriteFile(filepath.Join(root, "docs", "migration-benchmarks.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "migration-benchmarks.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
