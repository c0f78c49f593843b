package conformance

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// resetIDText is a reset tag's ID as the suite's --format prints it.
var resetIDText = regexp.MustCompile(`^ORD-[0-9]{8}-[0-9]{6}$`)

// caseResetTag: a reset tag's IDs as text are the node's lines; an integer
// call on IDs that are not numbers is the client's rejection, on IDs that
// are numbers it reads them; format= on a reset tag is invalid_format.
func caseResetTag(t *testing.T, w *world, d *driver) {
	zkArgs := []string{"--zk", w.zk.ConnectString(), "--cluster", clusterName}
	text, numeric := "orders-"+d.name, "daily-"+d.name
	ctl(t, append([]string{"segment", "create", text, "--reset", "daily", "--format", "ORD-{date}-{seq:6}"}, zkArgs...)...)
	ctl(t, append([]string{"segment", "create", numeric, "--reset", "daily"}, zkArgs...)...)
	d.open(map[string]any{"nodes": w.proxied()})
	var texts []string
	testsupport.Poll(t, 30*time.Second, 100*time.Millisecond, "the nodes to serve the reset tag", func() bool {
		a := d.do(map[string]any{"op": "next_segment_text", "tag": text, "n": 3, "deadline_ms": 5000}, nil)
		texts = a.Texts
		return a.Error == nil
	})
	_, direct := w.node0("/segment/" + text + "?count=2")
	for _, s := range append(slices.Clone(texts), strings.Split(direct, "\n")...) {
		if !resetIDText.MatchString(s) {
			t.Errorf("reset tag %s: %q (client %q, node %q) is not ORD-<date>-<6 digits>", text, s, texts, direct)
		}
	}
	if len(texts) != 3 || len(slices.Compact(slices.Sorted(slices.Values(texts)))) != 3 {
		t.Errorf("next_segment_text(%s, 3) = %q: want 3 distinct", text, texts)
	}
	a := d.do(map[string]any{"op": "next_segment", "tag": text, "deadline_ms": 5000}, nil)
	if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != http.StatusOK || !strings.Contains(a.Error.Message, "ORD-") {
		t.Errorf("next_segment(%s) on IDs that are not numbers: %v %v, want rejected (status 200) naming the text", text, a.IDs, a.Error)
	}
	a = d.do(map[string]any{"op": "next_segment_text", "tag": text, "n": 1, "format": "base62", "deadline_ms": 5000}, nil)
	if a.Error == nil || a.Error.Type != "rejected" || a.Error.Status != http.StatusBadRequest || a.Error.Code != "invalid_format" {
		t.Errorf("next_segment_text(%s, base62): %v %v, want rejected 400 invalid_format", text, a.Texts, a.Error)
	}
	// The default format, {date}{seq:6}, is a number: both calls read it.
	ids := parseIDs(t, d.ok(map[string]any{"op": "next_segment", "tag": numeric, "n": 2, "deadline_ms": 5000}).IDs)
	nums := d.ok(map[string]any{"op": "next_segment_text", "tag": numeric, "n": 2, "deadline_ms": 5000}).Texts
	for _, s := range append(strs(ids), nums...) {
		if len(s) != 14 || !strings.HasPrefix(s, time.Now().UTC().Format("20060102")[:6]) {
			t.Errorf("reset tag %s: %q is not <date><6 digits>", numeric, s)
		}
	}
}

func strs(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}
