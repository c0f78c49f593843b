package coordinator

import (
	"fmt"
	"strconv"
	"strings"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// WorkerRange is a cluster's --worker-id-range: the worker IDs it claims
// and recycles, Lo..Hi inclusive. Clusters (one ZooKeeper ensemble per
// region) with disjoint ranges and the same layout never issue the same
// ID. The zero value is the layout's whole worker field.
type WorkerRange struct{ Lo, Hi int64 }

// ParseWorkerRange reads "LO-HI" ("" is the zero value: the whole field).
func ParseWorkerRange(s string) (WorkerRange, error) {
	if strings.TrimSpace(s) == "" {
		return WorkerRange{}, nil
	}
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	l, err1 := strconv.ParseInt(lo, 10, 64)
	h, err2 := strconv.ParseInt(hi, 10, 64)
	if !ok || err1 != nil || err2 != nil || l < 0 || h < l {
		return WorkerRange{}, fmt.Errorf("worker ID range %q: want LO-HI, two whole numbers with 0 <= LO <= HI (e.g. 0-511)", s)
	}
	return WorkerRange{Lo: l, Hi: h}, nil
}

// resolve gives the zero value its meaning for layout l and checks that
// the range fits l's worker field.
func (r WorkerRange) resolve(l snowflake.Layout) (WorkerRange, error) {
	if r == (WorkerRange{}) {
		return WorkerRange{0, l.MaxWorkerID()}, nil
	}
	if r.Lo < 0 || r.Hi < r.Lo || r.Hi > l.MaxWorkerID() {
		return r, fmt.Errorf("worker ID range %s does not fit the worker IDs 0-%d of layout %s", r, l.MaxWorkerID(), l)
	}
	return r, nil
}

// String is "LO-HI".
func (r WorkerRange) String() string { return fmt.Sprintf("%d-%d", r.Lo, r.Hi) }

// Size is how many worker IDs the range holds.
func (r WorkerRange) Size() int64 { return r.Hi - r.Lo + 1 }

// contains reports whether worker ID id is in the range.
func (r WorkerRange) contains(id int64) bool { return id >= r.Lo && id <= r.Hi }

// implicit is the worker ID of the forever znode with sequence number seq
// that names none: Lo + seq while that is in the range, else none (it
// recycles one).
func (r WorkerRange) implicit(seq int64) int64 {
	if seq >= 0 && seq <= r.Hi-r.Lo {
		return r.Lo + seq
	}
	return noWorker
}
