package chaos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSchedule_Seeded(t *testing.T) {
	c := Config{Seed: 7, AgentKills: 20, EachOther: 1, MaxGap: 5 * time.Second}
	a, b := Schedule(c), Schedule(c)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different schedules (-a +b):\n%s", diff)
	}
	c.Seed = 8
	if cmp.Equal(a, Schedule(c)) {
		t.Error("seeds 7 and 8 gave the same schedule")
	}
}

func TestSchedule_Counts(t *testing.T) {
	c := Config{Seed: 1, AgentKills: 200, EachOther: 2, MaxGap: 3 * time.Second}
	got := map[Kind]int{}
	for i, f := range Schedule(c) {
		got[f.Kind]++
		if f.Seq != i+1 {
			t.Errorf("fault %d has seq %d", i, f.Seq)
		}
		if f.Gap < 0 || f.Gap > c.MaxGap {
			t.Errorf("fault %d gap %v outside [0, %v]", f.Seq, f.Gap, c.MaxGap)
		}
	}
	want := map[Kind]int{AgentKill: 200}
	for _, k := range Kinds[1:] {
		want[k] = 2
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faults per kind (-want +got):\n%s", diff)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{
		{AgentKills: -1, MaxGap: time.Second},
		{EachOther: -1, MaxGap: time.Second},
		{AgentKills: 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (Config{AgentKills: 20, EachOther: 1, MaxGap: time.Second}).Validate(); err != nil {
		t.Error(err)
	}
}
