package chaos

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestScheduleIsReproducibleAndBounded(t *testing.T) {
	cfg := ScheduleConfig{Nodes: 3, Duration: 30 * time.Second, MinGap: 100 * time.Millisecond, MaxGap: 700 * time.Millisecond, MaxOffset: 2 * time.Second}
	a, err := NewSchedule(42, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSchedule(42, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	c, _ := NewSchedule(43, cfg)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if len(a) < 30 || len(a) > int(cfg.Duration/cfg.MinGap)+cfg.Nodes+1 {
		t.Fatalf("%d faults in %s with gaps %s..%s", len(a), cfg.Duration, cfg.MinGap, cfg.MaxGap)
	}
	offsets := make([]time.Duration, cfg.Nodes)
	var small, large, forward int
	last := time.Duration(0)
	for _, f := range a {
		if f.At < last || f.At > cfg.Duration {
			t.Fatalf("fault out of order or time: %s after %s", f, last)
		}
		last = f.At
		if f.Offset > cfg.MaxOffset || f.Offset < -cfg.MaxOffset {
			t.Fatalf("offset beyond ±%s: %s", cfg.MaxOffset, f)
		}
		if f.Step != f.Offset-offsets[f.Node] {
			t.Fatalf("step %s does not match the offsets %s -> %s", f.Step, offsets[f.Node], f.Offset)
		}
		offsets[f.Node] = f.Offset
		if f.Step == 0 {
			t.Errorf("a fault that changes nothing: %s", f)
		}
		switch {
		case f.Step < 0 && f.Step >= -4*time.Millisecond:
			small++
		case f.Step < 0:
			large++
		case f.Step > 0:
			forward++
		}
	}
	for n, off := range offsets {
		if off != 0 {
			t.Errorf("node %d ends at offset %s, want 0", n, off)
		}
	}
	if small == 0 || large == 0 || forward == 0 {
		t.Errorf("schedule lacks a kind: %d small rollbacks, %d large, %d forward jumps", small, large, forward)
	}
}

func TestScheduleRejectsBadConfig(t *testing.T) {
	good := ScheduleConfig{Nodes: 3, Duration: time.Second, MinGap: 100 * time.Millisecond, MaxGap: 200 * time.Millisecond, MaxOffset: time.Second}
	tests := []struct {
		name string
		edit func(*ScheduleConfig)
	}{
		{"no nodes", func(c *ScheduleConfig) { c.Nodes = 0 }},
		{"no duration", func(c *ScheduleConfig) { c.Duration = 0 }},
		{"zero gap", func(c *ScheduleConfig) { c.MinGap = 0 }},
		{"gaps reversed", func(c *ScheduleConfig) { c.MaxGap = c.MinGap / 2 }},
		{"tiny offsets", func(c *ScheduleConfig) { c.MaxOffset = time.Millisecond }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			if _, err := NewSchedule(1, cfg); err == nil {
				t.Fatalf("NewSchedule(%+v) gave no error", cfg)
			}
		})
	}
}

func TestSeedFromEnvironment(t *testing.T) {
	tests := []struct {
		value string
		want  uint64
		err   bool
	}{
		{"12345", 12345, false},
		{"-1", 0, true},
		{"abc", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(SeedEnv, tc.value)
			got, err := Seed()
			if tc.err {
				if !errors.Is(err, ErrBadSeed) || !strings.Contains(err.Error(), tc.value) {
					t.Fatalf("Seed() error %v, want ErrBadSeed naming %q", err, tc.value)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Seed() = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	t.Run("unset", func(t *testing.T) {
		t.Setenv(SeedEnv, "")
		if s, err := Seed(); err != nil || s == 0 {
			t.Fatalf("Seed() = %d, %v", s, err)
		}
	})
}

func TestSummaryFigures(t *testing.T) {
	s := NewSummary("short", 7)
	s.AddScenario("one", Report{IDs: 100, Requests: 10, Problems: map[string]int64{ProblemDuplicate: 2, ProblemBadReason: 1}}, map[string]int64{"clock_rollback": 3})
	s.AddScenario("two", Report{IDs: 50, Requests: 5, Problems: map[string]int64{}}, nil)
	s.Injected(-5 * time.Second)
	s.Injected(-2 * time.Millisecond)
	s.Injected(time.Second)
	s.Killed()
	s.Measure(MeasureLeave, 30*time.Millisecond, "node a")
	s.Measure(MeasureLeave, 20*time.Millisecond, "node b")
	s.Measure(MeasureReturn, 5*time.Second, "node a")
	out := s.String()
	for _, want := range []string{
		"CHAOS_SEED=7", "IDs checked: 150 (in 15 answers)",
		"rollbacks injected: 2 (and 1 forward jumps, 1 kill -9)",
		"time to " + MeasureLeave + ": worst 30ms (node a; 2 measured)",
		"time to " + MeasureReturn + ": worst 5s (node a; 1 measured)",
		"duplicates found: 2", "other problems: bad_reason 1", "clock_rollback 3",
		"time to " + MeasureZnodeGone + ": none measured",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if d, ok := s.Worst(MeasureLeave); !ok || d != 30*time.Millisecond {
		t.Errorf("Worst(leave) = %s, %v", d, ok)
	}
	if _, ok := s.Worst(MeasureRestart); ok {
		t.Error("Worst of a kind never measured: ok")
	}
	path := t.TempDir() + "/summary.txt"
	t.Setenv(SummaryEnv, path)
	if got, err := s.WriteFile(); err != nil || got != path {
		t.Fatalf("WriteFile() = %q, %v", got, err)
	}
}
