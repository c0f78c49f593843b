// Package segment serves short, dense IDs (Leaf's "segment mode") from
// ranges allocated in ZooKeeper instead of a database.
//
// A tag is one dense sequence. Its ZooKeeper record holds max_id: every ID
// below it has been handed to some node. A node takes a range either from
// the tag's returned ranges (lowest first; whoever deletes a returned range
// owns it) or by advancing max_id by its step with a version-checked write
// (compare-and-set), then hands the range out from memory, loading the next
// one in the background once a tenth of the current one is used (a double
// buffer). The step doubles while a range lasts under LongRange/2 and
// halves when one lasts over LongRange, between the tag's base step and its
// max step.
//
// Service is the node's side (buffers, the state file); ZKStore is
// ZooKeeper's side (tags, allocation, returned ranges, holders), the Store
// a node's Service uses.
//
// Ordering argument (why no ID is issued twice):
//
//   - R1 A range is owned by exactly one holder at a time: ZooKeeper's
//     returned ranges (nobody), or one node. A CAS on max_id grants
//     [old, old+step) to one writer only; a returned range's znode is
//     deleted by one caller only.
//   - R2 A node issues an ID only below its persisted mark: the node's
//     state file lists the IDs of its ranges that are certainly unissued,
//     and an ID leaves that list (a write, fsynced) before it is issued. A
//     restart on the same disk resumes only that list, so it never reissues
//     what the crashed process issued; at most one chunk (the IDs between
//     the last issued and the mark) is lost per tag.
//   - R3 A clean stop first writes the state file without the ranges it
//     holds (fsynced), and only then returns them to ZooKeeper. A crash
//     between the two loses the ranges; it never leaves one both on disk and
//     in ZooKeeper. A return whose answer is lost is not retried from disk,
//     nor blindly: the store tells from the nonce it wrote with it whether
//     it happened (retried, after another node took the range, it would put
//     the range back a second time); when it cannot tell, the range is lost.
//   - R4 The state file is bound to the cluster's incarnation: a file from
//     another ZooKeeper (rebuilt, or another cluster) is discarded, not
//     resumed. The node holds the cache file's lock for its life, so two
//     processes never share one state file; one whose lock file is deleted
//     writes it no more.
//   - R7 A range belongs to one incarnation of its tag (the tag znode's
//     creation zxid): ranges, returned ranges, state-file entries and
//     opaque keys carry it, a node compares it at each ZooKeeper request
//     for the tag, and drops (never returns) ranges of an incarnation that
//     is gone; an opaque tag maps its numbers with the key of its ranges'
//     incarnation, whatever path the range took.
//
// docs/segments.md writes the argument out (R5, returns whose answer was
// lost; R6, a ZooKeeper that forgets acknowledged writes), with what a crash
// loses and the tests that attack each step.
//
// What it does not guarantee: IDs are not time-ordered, not ordered across
// nodes, and guessable (never use them where volume must stay secret).
package segment

import (
	"codeberg.org/snowflaked/snowflaked/internal/partstatus"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits and defaults of tags.
const (
	// MaxTagLen bounds a tag name in bytes.
	MaxTagLen = 128
	// DefaultStep is a tag's base step when none is given.
	DefaultStep = 1000
	// DefaultMaxStepFactor: a tag's max step defaults to its base step times
	// this.
	DefaultMaxStepFactor = 1000
	// maxID bounds every segment ID (they stay positive int64s).
	maxID = 1<<63 - 1
)

// Sentinel errors callers branch on.
var (
	// ErrUnknownTag: the tag does not exist in ZooKeeper.
	ErrUnknownTag = errors.New("unknown tag")
	// ErrInvalidTag: the tag name cannot be a tag (empty, too long, '/').
	ErrInvalidTag = errors.New("invalid tag")
	// ErrUnavailable: the node has no ID of the tag left and cannot load a
	// range (ZooKeeper unreachable, the disk hangs); retry later or
	// elsewhere.
	ErrUnavailable = errors.New("segment unavailable")
	// errTagExists: Create found the tag already there.
	errTagExists = errors.New("tag exists")
	// ErrExhausted: the tag's max_id would pass maxID, or an opaque tag
	// handed out all of its numbers.
	ErrExhausted = errors.New("tag exhausted")
	// ErrClosed: the service is stopping or stopped.
	ErrClosed = errors.New("segment service closed")
	// ErrTagGone: the incarnation of the tag the caller holds ranges of no
	// longer exists (the tag was deleted, and perhaps created again): its
	// ranges are dropped, never returned into the tag, its key not used.
	ErrTagGone = errors.New("tag deleted since")
)

// Range is the IDs [Lo, Hi) (a plain value of internal/partstatus, where
// the tag status that lists ranges lives).
type Range = partstatus.Range

// Tag is a tag's record in ZooKeeper.
type Tag struct {
	Name string `json:"-"`
	// Incarnation is the tag znode's creation zxid (Stat.Czxid): it changes
	// when the tag is deleted and created again, and every range, returned
	// range, state-file entry and key is bound to it. Not in the record.
	Incarnation int64  `json:"-"`
	MaxID       int64  `json:"max_id"`   // every ID below it was handed to some node
	Start       int64  `json:"start"`    // the first ID of the tag
	Step        int64  `json:"step"`     // base step
	MaxStep     int64  `json:"max_step"` // the dynamic step's ceiling
	Description string `json:"description,omitempty"`
	CreatedMS   int64  `json:"created_ms"`
	// Opaque, when set, makes the tag hand out D-digit numbers that are a
	// keyed permutation of its counter (see Permutation) instead of the
	// counter itself. Its key is a child znode readable only with the
	// cluster's credentials.
	Opaque *Opaque `json:"opaque,omitempty"`
	// RequireToken: requests for the tag need one of its tokens, whose
	// hashes are the child znode token (TokenSet), readable only with the
	// cluster's credentials. Set at creation, never changed.
	RequireToken bool `json:"require_token,omitempty"`
	// MaxCount, when above 0, is the most IDs one request may ask for.
	MaxCount int64 `json:"max_count,omitempty"`
	// Reset, when set, makes the tag's numbers restart each period,
	// printed with the period's date (see ResetRule). Set at creation.
	Reset *Reset `json:"reset,omitempty"`
	// Periods are a reset tag's started periods: each key's base, the
	// max_id when the period started (the newest maxPeriods).
	Periods map[string]int64 `json:"periods,omitempty"`
	// RestartBase and RestartThrough are left by the repair of a record
	// that went back (ZKStore.Repair): a period not in Periods, up to
	// RestartThrough, may have been started and forgotten, at a base no
	// lower than RestartBase; it starts (again) at RestartBase, so its
	// numbers go on above every number it handed out.
	RestartBase    int64  `json:"restart_base,omitempty"`
	RestartThrough string `json:"restart_through,omitempty"`
	// RestartFloor is the repair's max_id: such a period serves no counter
	// value below it (one may have been numbered under the forgotten
	// base).
	RestartFloor int64 `json:"restart_floor,omitempty"`
}

// Check validates a tag's numbers.
func (t Tag) Check() error {
	switch {
	case t.Start < 1:
		return fmt.Errorf("start %d: want at least 1", t.Start)
	case t.Step < 1:
		return fmt.Errorf("step %d: want at least 1", t.Step)
	case t.MaxStep < t.Step:
		return fmt.Errorf("max step %d is below the step %d", t.MaxStep, t.Step)
	case t.MaxID < t.Start:
		return fmt.Errorf("max_id %d is below the start %d", t.MaxID, t.Start)
	case t.MaxCount < 0:
		return fmt.Errorf("max count %d: want 0 (no ceiling) or more", t.MaxCount)
	case t.Reset != nil && t.Opaque != nil:
		return errors.New("a tag is opaque or resets by period, not both")
	case t.Reset != nil:
		_, err := t.Reset.Compile()
		return err
	case t.Opaque != nil:
		return t.Opaque.check()
	}
	return nil
}

// ValidateTag checks a tag name: 1..MaxTagLen bytes of printable UTF-8,
// no '/', not "." or "..", no spaces (it is a znode name and a URL path
// segment as is).
func ValidateTag(tag string) error {
	switch {
	case tag == "":
		return fmt.Errorf("%w: empty", ErrInvalidTag)
	case len(tag) > MaxTagLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidTag, len(tag), MaxTagLen)
	case tag == "." || tag == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTag, tag)
	case !utf8.ValidString(tag):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidTag)
	case strings.ContainsAny(tag, "/ ?#%\\"):
		return fmt.Errorf("%w: %q contains one of / space ? # %% \\", ErrInvalidTag, tag)
	}
	for _, r := range tag {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidTag, tag)
		}
	}
	return nil
}

// Store is where tags live (ZooKeeper; an in-memory one in tests).
type Store interface {
	// Alloc hands the caller a range of incarnation inc of tag that it
	// alone owns: the lowest range of inc returned starting at or above
	// above, if any, else [max_id, max_id+step) by compare-and-set.
	// ErrUnknownTag when the tag does not exist, ErrTagGone when it is of
	// another incarnation than inc.
	Alloc(ctx context.Context, tag string, inc, step, above int64) (Range, Tag, error)
	// Return gives an unissued range of incarnation inc back for the next
	// Alloc of inc anywhere. It is called once per range: an implementation
	// resolves a lost answer itself (it must never put a range back twice)
	// and waits out an unreachable store within ctx. An error means the
	// range is lost; ErrTagGone or ErrUnknownTag that its incarnation is
	// gone (the range is dropped, never put into another incarnation).
	Return(ctx context.Context, tag string, inc int64, r Range) error
	// Tag reads a tag's record, with its incarnation (ErrUnknownTag when
	// missing).
	Tag(ctx context.Context, tag string) (Tag, error)
	// Publish records, for status, which ranges this holder has (best
	// effort; an empty list removes the record).
	Publish(ctx context.Context, tag, holder string, held []Range) error
}
