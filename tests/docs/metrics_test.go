package docs

import (
	"bytes"
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"go/ast"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/metrics"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fullSnapshot has every section of a node's snapshot, with figures that
// make the metrics package write every family it has (e.g. a usable NTP
// answer, a reachable peer, a report to ZooKeeper, a segment tag).
func fullSnapshot(now time.Time, guard *health.Guard) nodestate.Snapshot {
	r := clockguard.BuildReadings(guard, nil, nil, nil)
	r.Watcher = &clockguard.WatcherStats{Checks: 10, BackwardSteps: 1, ForwardSteps: 1, LargestBackward: time.Second, LargestForward: time.Second}
	r.NTP = &clockguard.NTPSnapshot{
		Enabled: true, Servers: []string{"127.0.0.1:123"}, MaxOffset: 500 * time.Millisecond,
		Last:   &clockguard.NTPResult{Server: "127.0.0.1:123", Offset: time.Millisecond, RTT: time.Millisecond, CheckedAt: now},
		Rounds: 1, OffsetFailures: 1, UnreachableRounds: 1, ServerErrors: 1,
	}
	r.Peers = &clockguard.PeerSnapshot{
		MaxOffset: time.Second,
		Peers: []clockguard.PeerResult{
			{WorkerID: 1, Addr: "127.0.0.1:8082", Offset: time.Millisecond, RTT: time.Millisecond, CheckedAt: now},
			{WorkerID: 2, Addr: "127.0.0.1:8083", Error: "connection refused", CheckedAt: now},
		},
		Median: time.Millisecond, Reachable: 1, Unreachable: 1, CheckedAt: now,
		Rounds: 1, OffsetFailures: 1, UnreachablePeers: 1, SourceErrors: 1,
	}
	return nodestate.Snapshot{
		Mode: nodestate.ModeZooKeeper, WorkerID: 7, Layout: snowflake.DefaultLayout(), Now: now,
		Readings: r,
		Generator: nodestate.Generator{
			Stats: snowflake.Stats{SequenceWaits: 1, RollbackWaits: 1, Rollbacks: 1, FenceHits: 1, Waited: time.Millisecond},
		},
		Fence: snowflake.UnixMilliOf(now.Add(3 * time.Second)),
		ZK: &coordinator.Status{
			WorkerID: 7, Connected: true, SessionState: "StateHasSession", LeaseHeld: true, AlivePresent: true,
			LastReport: 1, LastReportAgeMs: 1500, ZKFence: 1, Reports: 3, ReportFailures: 1,
		},
		PrevHolderWait: 2 * time.Second,
		Segments:       []segment.TagStatus{{Tag: "orders", Issued: 1, Loads: 1, Available: 9, Step: 10, Token: true, RefusedRequired: 1}},

		TLSHandshakeFailures: []uint64{1, 1, 1, 1},
	}
}

// family is one metric family of a scrape: its type and label names.
type family struct {
	typ    string
	labels map[string]bool
}

var (
	typeLineRE  = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) ([a-z]+)$`)
	sampleRE    = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? `)
	labelNameRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	familyRE    = regexp.MustCompile(`^snowflaked_[a-z0-9_]+`)
)

// scrapeFamilies creates the metrics with every source and returns the
// families of one scrape by name.
func scrapeFamilies(t *testing.T) map[string]family {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	guard := health.New(zerolog.Nop(), func() time.Time { return now })
	guard.Check(health.ReasonNTPOffset).Fail("figures")
	m, err := metrics.New(metrics.Config{
		Snapshot:          func() nodestate.Snapshot { return fullSnapshot(now, guard) },
		RollbackTolerance: 5 * time.Millisecond,
		RollbackPolicy:    "borrow",
	})
	if err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	m.Request(endpoint.ID, 200)
	m.IssuedIDs(1)
	m.ObserveRollback(time.Second, now)
	var buf bytes.Buffer
	m.WritePrometheus(&buf)

	fams := map[string]family{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if mt := typeLineRE.FindStringSubmatch(line); mt != nil {
			f := fams[mt[1]]
			f.typ = mt[2]
			if f.labels == nil {
				f.labels = map[string]bool{}
			}
			fams[mt[1]] = f
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ms := sampleRE.FindStringSubmatch(line)
		if ms == nil {
			t.Fatalf("cannot parse exposition line %q", line)
		}
		f := fams[ms[1]]
		if f.labels == nil {
			f.labels = map[string]bool{}
		}
		for _, l := range labelNameRE.FindAllStringSubmatch(ms[2], -1) {
			f.labels[l[1]] = true
		}
		fams[ms[1]] = f
	}
	for name, f := range fams {
		if f.typ == "" {
			t.Fatalf("family %s has no TYPE line", name)
		}
	}
	return fams
}

// sourceFamilies returns the snowflaked_* family names found in the string
// literals of the metrics package's non-test files.
func sourceFamilies(t *testing.T) map[string]bool {
	t.Helper()
	fset, files := parsePackage(t, "internal/metrics")
	names := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Errorf("%s: unquote %s: %v", fset.Position(lit.Pos()), lit.Value, err)
				return true
			}
			if name := familyRE.FindString(s); name != "" {
				names[name] = true
			}
			return true
		})
	}
	return names
}

// TestDocsMetrics checks that docs/operations.md's metrics table lists every
// family the metrics package can expose, with its type and labels, and
// nothing else.
func TestDocsMetrics(t *testing.T) {
	fams := scrapeFamilies(t)
	inSource := sourceFamilies(t)
	if len(fams) < 20 || len(inSource) < 20 {
		t.Fatalf("found %d families in a scrape and %d in the source: the enumeration is broken", len(fams), len(inSource))
	}
	for name := range inSource {
		if _, ok := fams[name]; !ok {
			t.Errorf("metrics/*.go names %s but the test's scrape did not show it: give the fakes in tests/docs/metrics_test.go what makes it appear", name)
		}
	}
	for name := range fams {
		if !inSource[name] && strings.HasPrefix(name, "snowflaked_") {
			t.Errorf("the scrape shows %s, which no string literal in metrics/*.go names: the source scan is broken", name)
		}
	}

	sec := section(t, doc(t, docOperations), secMetrics)
	rows := map[string][]string{}
	for _, cells := range tableRows(sec) {
		spans := codeSpans(cells[0])
		if len(spans) != 1 || !strings.HasPrefix(spans[0], "snowflaked_") {
			continue // header or another table
		}
		if _, dup := rows[spans[0]]; dup {
			t.Errorf("metrics table lists %s twice", spans[0])
		}
		rows[spans[0]] = cells
	}
	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := fams[name]
		cells, ok := rows[name]
		if !ok {
			t.Errorf("metrics table has no row for %s (%s)", name, f.typ)
			continue
		}
		if len(cells) != 4 {
			t.Errorf("metrics row of %s has %d cells, want 4 (metric | type | labels | meaning)", name, len(cells))
			continue
		}
		if cells[1] != f.typ {
			t.Errorf("docs/operations.md says %s is a %q, the scrape says %q", name, cells[1], f.typ)
		}
		var want []string
		for l := range f.labels {
			want = append(want, l)
		}
		sort.Strings(want)
		got := codeSpans(cells[2])
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("docs/operations.md lists labels %q for %s, the scrape has %q", got, name, want)
		}
		if strings.TrimSpace(cells[3]) == "" {
			t.Errorf("metrics row of %s says nothing about it", name)
		}
	}
	for name := range rows {
		if _, ok := fams[name]; !ok {
			t.Errorf("metrics table lists %s, which the metrics package does not expose", name)
		}
	}
}
