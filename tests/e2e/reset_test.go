package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// resetNode is one node of the reset-tag test: its chaos clock offset, and
// the process now serving (replaced under mu by a restart).
type resetNode struct {
	mu   sync.RWMutex
	p    *proc
	old  []*proc
	args []string
	env  string // SNOWFLAKED_CHAOS_CLOCK_OFFSET=…
}

// resetAnswer is one number a node answered, in the order it answered.
type resetAnswer struct {
	node int
	text string
}

// Three chaos-build nodes against a real ZooKeeper serve a daily reset tag
// (UTC, {date}{seq:6}, --start 100) across a real midnight: each node's
// clock is moved (SNOWFLAKED_CHAOS_CLOCK_OFFSET) to about 12 s before the
// next UTC midnight, the three up to 0.8 s apart, and numbers are fetched
// from all three, one request at a time per node, for 25 s; one node is
// killed (kill -9) a second before its midnight and started again on its
// disk. Every answer must print as the format says, with a date of one of
// the two days; no number twice within a day; each node's dates never go
// back in the order it answered (across its restart too); each day's
// smallest number is the start, the new day's included.
func TestIntegration_ResetTagAcrossMidnight(t *testing.T) {
	const (
		cluster = "reset"
		first   = 100
		ahead   = 12 * time.Second // each clock this far before midnight when the nodes start
		fetch   = 25 * time.Second
	)
	zk := zkharness.StartStandalone(t)
	t0 := time.Now()
	midnight := t0.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	skews := []time.Duration{0, 400 * time.Millisecond, 800 * time.Millisecond}
	nodes := make([]*resetNode, 3)
	for i := range nodes {
		offset := midnight.Add(-ahead).Sub(t0) + skews[i]
		// One disk per node, kept across its restart.
		nodes[i] = &resetNode{args: clusterArgs(t.TempDir(), zk.ConnectString(), cluster, fmt.Sprintf("node-%d", i)),
			env: "SNOWFLAKED_CHAOS_CLOCK_OFFSET=" + offset.String()}
	}
	// The first node creates the cluster; the tag is created on it.
	nodes[0].p = startNode(t, binChaos, nodes[0].args, nodes[0].env)
	nodes[0].p.waitReadyz(http.StatusOK, readyTimeout)
	if code, out, errOut := ctl(t, "segment", "create", "orders", "--reset", "daily", "--tz", "UTC", "--format", "{date}{seq:6}",
		"--start", strconv.Itoa(first), "--step", "50", "--zk", zk.ConnectString(), "--cluster", cluster); code != 0 {
		t.Fatalf("segment create --reset: exit %d\n%s%s", code, out, errOut)
	}
	var wg sync.WaitGroup
	for _, n := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.p = start(t, binChaos, n.args, n.env)
		}()
	}
	wg.Wait()
	for _, n := range nodes {
		n.p.waitStarted()
	}
	for _, n := range nodes {
		n.p.waitReadyz(http.StatusOK, readyTimeout)
	}
	if left := time.Until(t0.Add(ahead)); left < 3*time.Second {
		t.Fatalf("the nodes took %v to start: their clocks are %v from midnight, too near to see the day before", time.Since(t0), left)
	}

	var (
		mu      sync.Mutex
		answers [3][]resetAnswer
		refused [3]map[string]int
	)
	stop := time.Now().Add(fetch)
	for i, n := range nodes {
		refused[i] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				n.mu.RLock()
				code, body := n.p.get("/segment/orders?count=5")
				n.mu.RUnlock()
				mu.Lock()
				if code == http.StatusOK {
					for _, line := range strings.Fields(body) {
						answers[i] = append(answers[i], resetAnswer{i, line})
					}
				} else {
					refused[i][fmt.Sprintf("%d %s", code, firstWords(body))]++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	// kill -9 of node 1 a second before its clock's midnight, and its
	// restart on the same disk with the same clock.
	killed := nodes[1]
	time.Sleep(time.Until(t0.Add(ahead - skews[1] - time.Second)))
	killed.mu.Lock()
	killed.p.signal(syscall.SIGKILL)
	killed.p.exitCode()
	killed.old = append(killed.old, killed.p)
	killed.p = startNode(t, binChaos, killed.args, killed.env)
	killed.mu.Unlock()
	t.Logf("node 1 killed and started again at %v on its clock", time.Now().Add(midnight.Add(-ahead).Sub(t0)+skews[1]).UTC().Format("15:04:05.000"))
	wg.Wait()

	checkResetDays(t, answers, refused, midnight, first)
}

// checkResetDays checks the answers of the reset-tag test's nodes, around
// midnight: each one prints as {date}{seq:6} with a date of the day
// before or the day of midnight, no number twice within a day, each node's
// dates never go back, and each day's smallest number is first.
func checkResetDays(t *testing.T, answers [3][]resetAnswer, refused [3]map[string]int, midnight time.Time, first int64) {
	t.Helper()
	day0, day1 := midnight.Add(-time.Hour).Format("20060102"), midnight.Format("20060102")
	seen := map[string]map[int64]int{} // date → number → node
	total := 0
	for i := range answers {
		total += checkResetNodeAnswers(t, i, answers[i], seen, day0, day1, first)
	}
	for _, date := range []string{day0, day1} {
		nums := make([]int64, 0, len(seen[date]))
		for n := range seen[date] {
			nums = append(nums, n)
		}
		sort.Slice(nums, func(a, b int) bool { return nums[a] < nums[b] })
		if len(nums) == 0 {
			t.Fatalf("no number of %s was answered (%d answers in all; refused: %v)", date, total, refused)
		}
		if nums[0] != first {
			t.Errorf("the smallest number of %s is %d: want the start, %d", date, nums[0], first)
		}
		t.Logf("%s: %d numbers, %d to %d", date, len(nums), nums[0], nums[len(nums)-1])
	}
	for i := range answers {
		t.Logf("node %d: %d numbers; refused: %v", i, len(answers[i]), refused[i])
	}
}

// checkResetNodeAnswers checks node i's answers, in the order it answered
// them: each prints as {date}{seq:6} with date day0 or day1 and a number
// from first on, its dates never go back, and no number of a day is in
// seen (date → number → node) already, which it adds them to. It returns
// how many answers it checked.
func checkResetNodeAnswers(t *testing.T, i int, answers []resetAnswer, seen map[string]map[int64]int, day0, day1 string, first int64) int {
	t.Helper()
	format := regexp.MustCompile(`^([0-9]{8})([0-9]{6})$`)
	last := ""
	for _, a := range answers {
		m := format.FindStringSubmatch(a.text)
		if m == nil {
			t.Fatalf("node %d answered %q: not {date}{seq:6}", i, a.text)
		}
		date := m[1]
		if date != day0 && date != day1 {
			t.Fatalf("node %d answered %q: date %s, neither %s nor %s", i, a.text, date, day0, day1)
		}
		if _, err := time.Parse("20060102", date); err != nil {
			t.Fatalf("node %d answered %q: %v", i, a.text, err)
		}
		if date < last {
			t.Fatalf("node %d answered %q after a number of %s: its dates went back", i, a.text, last)
		}
		last = date
		num, _ := strconv.ParseInt(m[2], 10, 64)
		if num < first {
			t.Fatalf("node %d answered %q: number %d below the start %d", i, a.text, num, first)
		}
		if seen[date] == nil {
			seen[date] = map[int64]int{}
		}
		if by, dup := seen[date][num]; dup {
			t.Fatalf("%q handed out twice: by node %d and node %d", a.text, by, i)
		}
		seen[date][num] = i
	}
	return len(answers)
}

// firstWords is the start of an error body, for tallying refusals.
func firstWords(body string) string {
	if i := strings.Index(body, `"code":"`); i >= 0 {
		rest := body[i+8:]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			return rest[:j]
		}
	}
	if len(body) > 40 {
		return body[:40]
	}
	return body
}
