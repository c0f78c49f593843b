package segment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

func TestResetCompile(t *testing.T) {
	day := time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		r     Reset
		want  string // AppendID of number 123 in day's period; "" when Compile must fail
		err   string
		width int
	}{
		{"daily default", Reset{Every: EveryDay, Format: "{date}{seq:6}"}, "20261207000123", "", 6},
		{"daily pattern", Reset{Every: EveryDay, Format: "ORD-{date:yyyy-MM-dd}-{seq:4}"}, "ORD-2026-12-07-0123", "", 4},
		{"monthly", Reset{Every: EveryMonth, Format: "{date}{seq:8}"}, "20261200000123", "", 8},
		{"yearly no width", Reset{Every: EveryYear, Format: "Y{date}N{seq}"}, "Y2026N123", "", 0},
		{"braces", Reset{Every: EveryDay, Format: "{{{date}}}{seq:3}"}, "{20261207}123", "", 3},
		{"zone ahead", Reset{Every: EveryDay, Zone: "Asia/Shanghai", Format: "{date}{seq:3}"}, "20261207123", "", 3},
		{"zone next day", Reset{Every: EveryDay, Zone: "Pacific/Kiritimati", Format: "{date}{seq:3}"}, "20261208123", "", 3},
		{"bad every", Reset{Every: "hourly", Format: "{date}{seq}"}, "", "want daily, monthly or yearly", 0},
		{"bad zone", Reset{Every: EveryDay, Zone: "Mars/Olympus", Format: "{date}{seq}"}, "", "IANA", 0},
		{"local zone", Reset{Every: EveryDay, Zone: "Local", Format: "{date}{seq}"}, "", "IANA", 0},
		{"no seq", Reset{Every: EveryDay, Format: "{date}"}, "", "0 {seq} fields", 0},
		{"two seqs", Reset{Every: EveryDay, Format: "{date}{seq}{seq}"}, "", "2 {seq} fields", 0},
		{"no date", Reset{Every: EveryDay, Format: "X{seq:6}"}, "", "no {date}", 0},
		{"daily without day", Reset{Every: EveryDay, Format: "{date:yyyyMM}{seq}"}, "", "needs yyyy, MM, dd", 0},
		{"monthly without year", Reset{Every: EveryMonth, Format: "{date:MM}{seq}"}, "", "needs yyyy, MM", 0},
		{"bad pattern", Reset{Every: EveryDay, Format: "{date:yyyyMMddHH}{seq}"}, "", "pattern", 0},
		{"width 0", Reset{Every: EveryDay, Format: "{date}{seq:0}"}, "", "width from 1 to 18", 0},
		{"width 19", Reset{Every: EveryDay, Format: "{date}{seq:19}"}, "", "width from 1 to 18", 0},
		{"width 06", Reset{Every: EveryDay, Format: "{date}{seq:06}"}, "", "width from 1 to 18", 0},
		{"space", Reset{Every: EveryDay, Format: "{date} {seq}"}, "", "printable ASCII", 0},
		{"quote", Reset{Every: EveryDay, Format: `"{date}{seq}`}, "", "printable ASCII", 0},
		{"lone close", Reset{Every: EveryDay, Format: "{date}}{seq}"}, "", "lone }", 0},
		{"open", Reset{Every: EveryDay, Format: "{date}{seq"}, "", "not closed", 0},
		{"unknown field", Reset{Every: EveryDay, Format: "{date}{n}{seq}"}, "", "{n}", 0},
		{"empty", Reset{Every: EveryDay}, "", "empty", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rule, err := tc.r.Compile()
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Compile: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			key := rule.PeriodOf(day)
			if got := string(rule.AppendID(nil, key, 123)); got != tc.want {
				t.Fatalf("AppendID(%s, 123) = %q, want %q", key, got, tc.want)
			}
			if rule.Width() != tc.width {
				t.Fatalf("Width = %d, want %d", rule.Width(), tc.width)
			}
		})
	}
}

// A day whose midnight a DST change skips prints its own date: in
// Atlantic/Azores 2026-03-29 starts at 01:00 (00:00 does not exist), and
// in America/Asuncion October 2023 starts at 01:00 on its first day.
func TestResetDateAcrossDSTMidnight(t *testing.T) {
	for _, tc := range []struct {
		every, zone string
		at          time.Time
		want        string
	}{
		{EveryDay, "Atlantic/Azores", time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC), "20260329"},
		{EveryDay, "America/Santiago", time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC), "20260906"},
		{EveryDay, "America/Havana", time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC), "20260308"},
		{EveryMonth, "America/Asuncion", time.Date(2023, 10, 2, 12, 0, 0, 0, time.UTC), "202310"},
	} {
		rule, err := Reset{Every: tc.every, Zone: tc.zone, Format: "{date}{seq:3}"}.Compile()
		if err != nil {
			t.Fatal(err)
		}
		key := rule.PeriodOf(tc.at)
		if got := rule.Date(key); got != tc.want {
			t.Errorf("%s %s: period %s prints date %s, want %s", tc.zone, tc.every, key, got, tc.want)
		}
		if got := string(rule.AppendID(nil, key, 1)); got != tc.want+"001" {
			t.Errorf("%s %s: number 1 prints %s, want %s001", tc.zone, tc.every, got, tc.want)
		}
	}
}

// Period keys sort as their periods do, across year ends and in zones.
func TestResetPeriodKeysSortAsTime(t *testing.T) {
	for _, every := range []string{EveryDay, EveryMonth, EveryYear} {
		rule, err := Reset{Every: every, Zone: "America/St_Johns", Format: "{date}{seq}"}.Compile()
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 12, 30, 0, 0, 0, 0, time.UTC)
		prev := rule.PeriodOf(at)
		for i := range 24 * 40 {
			now := at.Add(time.Duration(i) * 97 * time.Minute)
			key := rule.PeriodOf(now)
			if key < prev {
				t.Fatalf("%s: key %s at %s sorts before %s", every, key, now, prev)
			}
			prev = key
		}
	}
}

func TestStartPeriod(t *testing.T) {
	tg := Tag{Name: "orders", MaxID: 100}
	if ok, err := startPeriod(&tg, "2026-12-07"); !ok || err != nil || tg.Periods["2026-12-07"] != 100 {
		t.Fatalf("first start: %v %v %v", ok, err, tg.Periods)
	}
	tg.MaxID = 500
	if ok, err := startPeriod(&tg, "2026-12-07"); ok || err != nil || tg.Periods["2026-12-07"] != 100 {
		t.Fatalf("a started period must keep its base: %v %v %v", ok, err, tg.Periods)
	}
	if _, err := startPeriod(&tg, "2026-12-06"); !errors.Is(err, ErrPeriodPassed) {
		t.Fatalf("an earlier period started: %v", err)
	}
	for d := range 40 {
		tg.MaxID += 10
		if _, err := startPeriod(&tg, fmt.Sprintf("2027-01-%02d", d+1)); err != nil && d < 31 {
			t.Fatal(err)
		}
	}
	if len(tg.Periods) != maxPeriods {
		t.Fatalf("%d periods kept, want %d", len(tg.Periods), maxPeriods)
	}
	if _, ok := tg.Periods["2026-12-07"]; ok {
		t.Fatal("the oldest period was not pruned")
	}
}

// resetNode is one node of the reset tests: a service with a clock of its
// own over a shared ZooKeeper.
type resetNode struct {
	name string
	file string
	skew time.Duration
	svc  *Service
}

// resetWorld is a reset tag served by nodes whose clocks the test moves.
type resetWorld struct {
	t     *testing.T
	store *ZKStore
	now   atomic.Int64 // virtual Unix ms
	seen  map[string]string
	first map[string]int64 // smallest number per period
	rule  *ResetRule
}

func newResetWorld(t *testing.T, r Reset, start, step int64) *resetWorld {
	t.Helper()
	st := segmentStore(t, newSegmentCluster(t))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := st.Create(ctx, Tag{Name: "orders", Start: start, Step: step, MaxStep: step, Reset: &r}); err != nil {
		t.Fatal(err)
	}
	rule, err := r.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &resetWorld{t: t, store: st, seen: map[string]string{}, first: map[string]int64{}, rule: rule}
}

func (w *resetWorld) start(n *resetNode) {
	w.t.Helper()
	svc, err := New(Config{Store: w.store, StateFile: n.file, Incarnation: "inc", Holder: n.name, MarkAhead: time.Nanosecond,
		PeriodClock: func() (time.Time, error) { return time.UnixMilli(w.now.Load()).Add(n.skew), nil }})
	if err != nil {
		w.t.Fatal(err)
	}
	n.svc = svc
}

var resetText = regexp.MustCompile(`^(\d{8})(\d{6})$`)

// take takes k numbers from n and checks them: unique in their period,
// printed as the format says, in a period not before the node's last.
func (w *resetWorld) take(n *resetNode, k int, last *string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nums, p, err := n.svc.TakePeriod(ctx, "orders", nil, nil, k)
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	if p.IsZero() || len(nums) != k {
		return fmt.Errorf("%s: %d numbers of period %+v", n.name, len(nums), p)
	}
	if p.Key < *last {
		return fmt.Errorf("%s served period %s after %s", n.name, p.Key, *last)
	}
	*last = p.Key
	for _, num := range nums {
		text := string(p.AppendID(nil, num))
		m := resetText.FindStringSubmatch(text)
		if m == nil || m[1] != strings.ReplaceAll(p.Key, "-", "") || m[1] != p.Date() {
			return fmt.Errorf("%s: %q does not print number %d of period %s", n.name, text, num, p.Key)
		}
		if who, dup := w.seen[text]; dup {
			return fmt.Errorf("%s handed out %s, which %s handed out", n.name, text, who)
		}
		w.seen[text] = n.name
		if f, ok := w.first[p.Key]; !ok || num < f {
			w.first[p.Key] = num
		}
	}
	return nil
}

// A daily tag served by three nodes with skewed clocks across midnight,
// one of them killed and restarted on its disk, one restarted cleanly:
// no number twice in a period, no node's period going back, the new day
// starting at the tag's start. Each range lasts a node about ten takes, so
// b and c reach midnight holding the old day's numbers, not having read
// the record since a started the new day: they start it again (AllocPeriod),
// which must keep a's base.
func TestResetTagAcrossMidnight(t *testing.T) {
	if err := acrossMidnight(t); err != nil {
		t.Fatal(err)
	}
}

// acrossMidnight runs TestResetTagAcrossMidnight's scenario, returning
// the first broken promise.
func acrossMidnight(t *testing.T) error {
	t.Helper()
	w := newResetWorld(t, Reset{Every: EveryDay, Format: "{date}{seq:6}"}, 1, 40)
	midnight := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	w.now.Store(midnight.Add(-6 * time.Second).UnixMilli())
	dir := t.TempDir()
	nodes := []*resetNode{
		{name: "a", skew: 1500 * time.Millisecond}, {name: "b"}, {name: "c", skew: -1500 * time.Millisecond},
	}
	last := make([]string, len(nodes))
	for _, n := range nodes {
		n.file = filepath.Join(dir, n.name+".segments")
		w.start(n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_, _ = n.svc.Close(context.Background())
		}
	})
	for step := range 24 {
		for i, n := range nodes {
			if err := w.take(n, 1+(step+i)%2, &last[i]); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
		switch step {
		case 13: // b dies just after midnight, comes back on its disk
			nodes[1].svc.Crash()
			w.start(nodes[1])
		case 17: // c stops cleanly and starts again
			if _, err := nodes[2].svc.Close(context.Background()); err != nil {
				return err
			}
			w.start(nodes[2])
		}
		w.now.Add(500)
	}
	if w.first["2026-12-08"] != 1 {
		return fmt.Errorf("the new day's smallest number is %d, want the start 1 (first numbers: %v)", w.first["2026-12-08"], w.first)
	}
	for i, l := range last {
		if l != "2026-12-08" {
			return fmt.Errorf("node %s ended in period %s", nodes[i].name, l)
		}
	}
	t.Logf("%d numbers, first per period %v", len(w.seen), w.first)
	return nil
}

// A node whose clock lags behind a period the tag has started refuses a
// period it never served (ErrPeriodPassed), and a tag deleted and created
// again continues its periods' numbers.
func TestResetTagLaggingNodeAndRecreate(t *testing.T) {
	w := newResetWorld(t, Reset{Every: EveryDay, Format: "{date}{seq:6}"}, 1, 7)
	w.now.Store(time.Date(2026, 12, 8, 0, 0, 1, 0, time.UTC).UnixMilli())
	ahead := &resetNode{name: "ahead"}
	w.start(ahead)
	var la, lb string
	if err := w.take(ahead, 3, &la); err != nil {
		t.Fatal(err)
	}
	lag := &resetNode{name: "lag", skew: -5 * time.Second}
	w.start(lag)
	err := w.take(lag, 1, &lb)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), ErrPeriodPassed.Error()) {
		t.Fatalf("a lagging node's take: %v, want ErrUnavailable naming %v", err, ErrPeriodPassed)
	}
	for _, n := range []*resetNode{ahead, lag} {
		n.svc.Crash()
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := w.store.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	err = w.store.Create(ctx, Tag{Name: "orders", Start: 1, Step: 7, MaxStep: 7, Reset: &Reset{Every: EveryDay, Format: "{date}{seq:8}"}})
	if !errors.Is(err, ErrNumbersIssued) {
		t.Fatalf("created again with another format: %v, want ErrNumbersIssued", err)
	}
	if err := w.store.Create(ctx, Tag{Name: "orders", Start: 1, Step: 7, MaxStep: 7, Reset: &Reset{Every: EveryDay, Format: "{date}{seq:6}"}}); err != nil {
		t.Fatal(err)
	}
	again := &resetNode{name: "again"}
	w.start(again)
	t.Cleanup(func() { _, _ = again.svc.Close(context.Background()) })
	var lc string
	for range 5 {
		if err := w.take(again, 4, &lc); err != nil { // a duplicate of the deleted tag's numbers fails here
			t.Fatal(err)
		}
	}
}

// A period that ran out of numbers of its width answers
// PeriodExhaustedError, never a wider number.
func TestResetTagPeriodExhausted(t *testing.T) {
	w := newResetWorld(t, Reset{Every: EveryDay, Format: "{date}{seq:6}"}, 999990, 7)
	w.now.Store(time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC).UnixMilli())
	n := &resetNode{name: "n"}
	w.start(n)
	t.Cleanup(func() { _, _ = n.svc.Close(context.Background()) })
	var last string
	if err := w.take(n, 10, &last); err != nil {
		t.Fatal(err)
	}
	_, _, err := n.svc.TakePeriod(context.Background(), "orders", nil, nil, 1)
	var pe *PeriodExhaustedError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPeriodExhausted) || pe.Width != 6 || pe.Limit != 999999 {
		t.Fatalf("take past the width: %v, want a PeriodExhaustedError of width 6", err)
	}
	// The next day starts again.
	w.now.Add(int64(24 * time.Hour / time.Millisecond))
	if err := w.take(n, 5, &last); err != nil || w.first["2026-12-09"] != 999990 {
		t.Fatalf("next day: %v, first %v", err, w.first)
	}
}

// Node b holds a range allocated after node a started day 2, drains its
// day-1 range, then its clock reaches day 2: the move needs no load. It
// issues nothing of day 2 before the state file says day 2, so killed
// (-9) and back with its clock a little behind midnight, b serves day 2,
// not day 1 again.
func TestResetPeriodSurvivesKill(t *testing.T) {
	w := newResetWorld(t, Reset{Every: EveryDay, Format: "{date}{seq:6}"}, 1, 100)
	midnight := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	w.now.Store(midnight.Add(-time.Second).UnixMilli())
	b := &resetNode{name: "b", file: filepath.Join(t.TempDir(), "b.segments")}
	w.start(b)
	a := &resetNode{name: "a", skew: 2 * time.Second}
	w.start(a)
	t.Cleanup(func() { _, _ = a.svc.Close(context.Background()) })
	var la, lb string
	for _, step := range []struct {
		n *resetNode
		k int
		l *string
	}{{b, 1, &lb}, {a, 1, &la}, {b, 9, &lb}, {b, 90, &lb}} {
		if err := w.take(step.n, step.k, step.l); err != nil {
			t.Fatal(err)
		}
	}
	if la != "2026-12-08" || lb != "2026-12-07" {
		t.Fatalf("a in %s, b in %s: want a in the new day, b in the old", la, lb)
	}
	// The case at stake: b holds day-2 values already below its mark, so
	// its move to day 2 needs neither a load nor a mark write.
	testsupport.Poll(t, 5*time.Second, 10*time.Millisecond, "b's mark 3 ahead of issuing, in a range above day 2's base", func() bool {
		b.svc.mu.Lock()
		buf := b.svc.tags["orders"]
		b.svc.mu.Unlock()
		buf.mu.Lock()
		defer buf.mu.Unlock()
		return len(buf.ranges) > 0 && buf.ranges[0].Lo >= buf.periods["2026-12-08"] && min(buf.permitted, buf.held)-buf.issued >= 3
	})
	w.now.Store(midnight.Add(300 * time.Millisecond).UnixMilli())
	if err := w.take(b, 3, &lb); err != nil || lb != "2026-12-08" {
		t.Fatalf("b after midnight: %v, period %s", err, lb)
	}
	b.svc.Crash() // before anything else can write the file
	st, err := readState(disk.OS{}, b.file)
	if err != nil || st.Tags["orders"].Period != "2026-12-08" {
		t.Fatalf("state file after b served the new day: %+v, %v; want its period 2026-12-08", st.Tags["orders"], err)
	}
	w.now.Store(midnight.Add(-200 * time.Millisecond).UnixMilli()) // b's clock stepped back 0.5 s
	w.start(b)
	t.Cleanup(func() { _, _ = b.svc.Close(context.Background()) })
	if err := w.take(b, 1, &lb); err != nil { // a period before lb fails here
		t.Fatal(err)
	}
}

// Returned ranges below the base of the period before the newest serve
// no node: a period's start drops them, so returned/ does not grow day by
// day.
func TestResetTagDropsPastReturns(t *testing.T) {
	w := newResetWorld(t, Reset{Every: EveryDay, Format: "{date}{seq:6}"}, 1, 10)
	day := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	w.now.Store(day.UnixMilli())
	ctx := context.Background()
	var last string
	for d := range 3 {
		n := &resetNode{name: fmt.Sprintf("day%d", d)}
		w.start(n)
		if err := w.take(n, 3, &last); err != nil {
			t.Fatal(err)
		}
		if _, err := n.svc.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ret, err := w.store.Returned(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		tg, err := w.store.Tag(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(maps.Keys(tg.Periods))
		for _, r := range ret {
			if len(keys) >= 2 && r.Hi <= tg.Periods[keys[len(keys)-2]] {
				t.Fatalf("day %d: returned %v lies below the base %d of period %s, the one before the newest", d, r, tg.Periods[keys[len(keys)-2]], keys[len(keys)-2])
			}
		}
		if d > 0 && len(ret) == 0 {
			t.Fatalf("day %d: no returned range at all: the test returns none", d)
		}
		w.now.Add(int64(24 * time.Hour / time.Millisecond))
	}
}
