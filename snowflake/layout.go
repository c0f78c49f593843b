// Package snowflake generates and decodes 64-bit snowflake IDs:
// timestamp | worker | sequence, highest bits first, always positive.
package snowflake

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrInvalidLayout is wrapped by every layout validation and parse error.
	ErrInvalidLayout = errors.New("invalid layout")
	// ErrInvalidID is wrapped when an ID cannot belong to a layout.
	ErrInvalidID = errors.New("invalid id")
)

// DefaultEpoch is the default start of time for IDs: 2024-01-01T00:00:00Z.
var DefaultEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Layout is the bit split of an ID and the meaning of its timestamp field.
type Layout struct {
	TimeBits     uint          // bits of the timestamp field (ticks since Epoch)
	WorkerBits   uint          // bits of the worker ID
	SequenceBits uint          // bits of the per-tick sequence
	Epoch        time.Time     // tick 0
	Unit         time.Duration // length of one tick
	// GeneBits are the low bits of the sequence field given to a gene
	// (0..MaxGeneBits, at most SequenceBits): an ID asked for with gene G
	// ends in G mod 2^GeneBits. The per-tick count is what is left,
	// 2^(SequenceBits-GeneBits).
	GeneBits uint
}

// MaxGeneBits bounds Layout.GeneBits.
const MaxGeneBits = 10

// Preset names accepted by ParseBits besides "T/W/S".
const (
	PresetDefault = "41/10/12"
	PresetJS53    = "js53"
)

// DefaultLayout is 41/10/12 with millisecond ticks from DefaultEpoch: 1024
// workers, 4096 IDs per millisecond each, timestamps good for ~69 years.
func DefaultLayout() Layout {
	return Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: DefaultEpoch, Unit: time.Millisecond}
}

// JS53Layout is 41/5/7 with millisecond ticks: every ID is at most 2^53-1, so
// it survives a JavaScript number. The price: 32 workers and 128 IDs per
// millisecond (128,000 IDs/s) per worker.
func JS53Layout() Layout {
	return Layout{TimeBits: 41, WorkerBits: 5, SequenceBits: 7, Epoch: DefaultEpoch, Unit: time.Millisecond}
}

// ParseBits parses the --layout flag: "T/W/S" (e.g. "41/10/12"), "default"
// or "js53". It checks syntax only; Validate checks the whole layout.
func ParseBits(s string) (timeBits, workerBits, seqBits uint, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "default", PresetDefault:
		l := DefaultLayout()
		return l.TimeBits, l.WorkerBits, l.SequenceBits, nil
	case PresetJS53:
		l := JS53Layout()
		return l.TimeBits, l.WorkerBits, l.SequenceBits, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: %q: want time/worker/sequence bits like 41/10/12, or js53", ErrInvalidLayout, s)
	}
	var v [3]uint
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 8)
		if err != nil || n > 63 {
			return 0, 0, 0, fmt.Errorf("%w: %q: %q is not a bit count between 0 and 63", ErrInvalidLayout, s, p)
		}
		v[i] = uint(n)
	}
	return v[0], v[1], v[2], nil
}

// ParseLayout builds and validates a layout from the --layout, --epoch
// (RFC 3339) and --time-unit (Go duration) flag values. now is used to
// reject an epoch in the future.
func ParseLayout(bits, epoch, unit string, now time.Time) (Layout, error) {
	l, err := parseFields(bits, epoch, unit)
	if err != nil {
		return Layout{}, err
	}
	if err := l.Validate(now); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// parseFields parses the three layout fields and checks the layout's shape.
// A field that does not parse does not hide the others': their errors are
// joined.
func parseFields(bits, epoch, unit string) (Layout, error) {
	var l Layout
	var err error
	var errs []error
	if l.TimeBits, l.WorkerBits, l.SequenceBits, err = ParseBits(bits); err != nil {
		errs = append(errs, err)
	}
	if l.Epoch, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(epoch)); err != nil {
		errs = append(errs, fmt.Errorf("%w: epoch %q is not an RFC 3339 time like 2024-01-01T00:00:00Z", ErrInvalidLayout, epoch))
	}
	l.Epoch = l.Epoch.UTC()
	if l.Unit, err = time.ParseDuration(strings.TrimSpace(unit)); err != nil {
		errs = append(errs, fmt.Errorf("%w: time unit %q is not a duration like 1ms", ErrInvalidLayout, unit))
	}
	if len(errs) > 0 {
		return Layout{}, errors.Join(errs...)
	}
	return l, l.validateShape()
}

// Validate reports the first thing wrong with the layout. now is used to
// reject an epoch in the future and a timestamp field already exhausted.
func (l Layout) Validate(now time.Time) error {
	if err := l.validateShape(); err != nil {
		return err
	}
	switch {
	case l.Epoch.After(now):
		return fmt.Errorf("%w: epoch %s is in the future (now %s)", ErrInvalidLayout, l.Epoch.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case !l.End().After(now):
		return fmt.Errorf("%w: %s with epoch %s ran out of timestamps at %s", ErrInvalidLayout, l, l.Epoch.Format(time.RFC3339), l.End().Format(time.RFC3339))
	}
	return nil
}

// The epoch must be a whole Unix millisecond between these: tick arithmetic is
// done in int64 Unix nanoseconds from the epoch, and fences and last issued
// timestamps travel as Unix milliseconds, which must convert to ticks exactly.
var (
	minEpoch = time.Unix(0, 0).UTC()
	maxEpoch = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Millisecond)
)

// validateShape checks everything that does not depend on the clock.
func (l Layout) validateShape() error {
	switch {
	case l.TimeBits > 63 || l.WorkerBits > 63 || l.SequenceBits > 63: // else the sum below can wrap
		return fmt.Errorf("%w: %s has a bit count above 63", ErrInvalidLayout, l)
	case l.TimeBits+l.WorkerBits+l.SequenceBits > 63:
		return fmt.Errorf("%w: %s uses %d bits, at most 63 fit a positive int64", ErrInvalidLayout, l, l.TimeBits+l.WorkerBits+l.SequenceBits)
	case l.SequenceBits == 0:
		return fmt.Errorf("%w: %s has no sequence bits: at most one ID per tick", ErrInvalidLayout, l)
	case l.GeneBits > MaxGeneBits:
		return fmt.Errorf("%w: %d gene bits, at most %d", ErrInvalidLayout, l.GeneBits, MaxGeneBits)
	case l.GeneBits > l.SequenceBits:
		return fmt.Errorf("%w: %d gene bits do not fit the %d sequence bits of %s", ErrInvalidLayout, l.GeneBits, l.SequenceBits, l.bits())
	case l.TimeBits < 20:
		return fmt.Errorf("%w: %s has %d time bits, fewer than 20 run out too soon", ErrInvalidLayout, l, l.TimeBits)
	case l.Unit < time.Millisecond:
		return fmt.Errorf("%w: time unit %s is below 1ms", ErrInvalidLayout, l.Unit)
	case l.Unit > time.Hour:
		return fmt.Errorf("%w: time unit %s is above 1h", ErrInvalidLayout, l.Unit)
	case l.Unit%time.Millisecond != 0:
		return fmt.Errorf("%w: time unit %s is not a whole number of milliseconds", ErrInvalidLayout, l.Unit)
	case l.Epoch.IsZero():
		return fmt.Errorf("%w: no epoch", ErrInvalidLayout)
	case l.Epoch.Before(minEpoch):
		return fmt.Errorf("%w: epoch %s is before %s", ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339Nano), minEpoch.Format(time.RFC3339))
	case l.Epoch.After(maxEpoch):
		return fmt.Errorf("%w: epoch %s is too far in the future (after %s)", ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339Nano), maxEpoch.Format(time.RFC3339Nano))
	case l.Epoch.Nanosecond()%int(time.Millisecond) != 0:
		return fmt.Errorf("%w: epoch %s is not a whole millisecond", ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// String returns the bit split as "T/W/S", followed by " gene K" when
// the layout has gene bits.
func (l Layout) String() string {
	if l.GeneBits > 0 {
		return fmt.Sprintf("%s gene %d", l.bits(), l.GeneBits)
	}
	return l.bits()
}

func (l Layout) bits() string {
	return fmt.Sprintf("%d/%d/%d", l.TimeBits, l.WorkerBits, l.SequenceBits)
}

// MaxGene is the largest value of the gene field (0 without gene bits).
func (l Layout) MaxGene() int64 { return int64(1)<<l.GeneBits - 1 }

// PerTick is how many IDs one worker can issue in one tick:
// 2^(SequenceBits-GeneBits).
func (l Layout) PerTick() int64 { return int64(1) << (l.SequenceBits - l.GeneBits) }

// Describe returns the split, epoch and unit, e.g. "41/10/12 epoch 2024-01-01T00:00:00Z unit 1ms".
func (l Layout) Describe() string {
	return fmt.Sprintf("%s epoch %s unit %s", l, l.Epoch.UTC().Format(time.RFC3339Nano), l.Unit)
}

// Equal reports whether two layouts produce and decode the same IDs.
func (l Layout) Equal(o Layout) bool {
	return l.TimeBits == o.TimeBits && l.WorkerBits == o.WorkerBits && l.SequenceBits == o.SequenceBits && l.GeneBits == o.GeneBits &&
		l.Epoch.Equal(o.Epoch) && l.Unit == o.Unit
}

// MaxWorkerID is the largest worker ID the layout can hold.
func (l Layout) MaxWorkerID() int64 { return int64(1)<<l.WorkerBits - 1 }

// MaxSequence is the largest per-tick sequence number.
func (l Layout) MaxSequence() int64 { return int64(1)<<l.SequenceBits - 1 }

// MaxTick is the largest timestamp field value.
func (l Layout) MaxTick() int64 { return int64(1)<<l.TimeBits - 1 }

// MaxID is the largest ID the layout can produce.
func (l Layout) MaxID() int64 {
	return int64(uint64(1)<<(l.TimeBits+l.WorkerBits+l.SequenceBits) - 1)
}

// PerSecond is the ceiling of IDs per second for one worker.
func (l Layout) PerSecond() float64 {
	return float64(l.MaxSequence()+1) * float64(time.Second) / float64(l.Unit)
}

// End is the first instant the timestamp field cannot represent. For a
// layout lasting beyond ~292 million years it is a time further still; for
// a unit below 1ms it is the epoch.
func (l Layout) End() time.Time {
	ms, ok := l.tickStartMilli(l.MaxTick() + 1)
	if !ok {
		return time.Unix(1<<62, 0).UTC()
	}
	return time.UnixMilli(ms).UTC()
}

// tickStartMilli returns the Unix-millisecond start of a tick, and false
// when it does not fit an int64. It is exact for a valid layout (whole
// millisecond epoch and unit) and, unlike TickStart, cannot overflow.
func (l Layout) tickStartMilli(tick int64) (int64, bool) {
	u, e := int64(l.Unit/time.Millisecond), l.Epoch.UnixMilli()
	if u <= 0 {
		return e, true
	}
	if tick > (math.MaxInt64-max(e, 0))/u || tick < (math.MinInt64-min(e, 0))/u {
		return 0, false
	}
	return e + tick*u, true // |tick*u| leaves room for e: no overflow
}

// tickOfMilli returns the tick containing the Unix-millisecond time ms,
// saturated to math.MaxInt64/math.MinInt64 far beyond or before the epoch.
// It is exact for a valid layout and, unlike TickOf(ms*1e6), cannot overflow.
func (l Layout) tickOfMilli(ms int64) int64 {
	u, e := int64(l.Unit/time.Millisecond), l.Epoch.UnixMilli()
	if u <= 0 {
		u = 1
	}
	return floorTick(ms, e, u)
}

// floorTick returns floor((t-e)/u) for u > 0, saturated to
// math.MinInt64/math.MaxInt64 when t-e overflows.
func floorTick(t, e, u int64) int64 {
	d := t - e
	switch {
	case e > 0 && d > t: // wrapped below math.MinInt64
		return math.MinInt64
	case e < 0 && d < t: // wrapped above math.MaxInt64
		return math.MaxInt64
	case d < 0:
		return (d+1)/u - 1 // floor without negating d (-math.MinInt64 overflows)
	}
	return d / u
}

// TickOf returns the tick containing the Unix-nanosecond time ns (negative
// before the epoch).
func (l Layout) TickOf(ns int64) int64 {
	return floorTick(ns, l.Epoch.UnixNano(), int64(l.Unit))
}

// TickStart returns the Unix-nanosecond start of a tick.
func (l Layout) TickStart(tick int64) int64 { return l.Epoch.UnixNano() + tick*int64(l.Unit) }

// Compose builds an ID. It does not check ranges: the generator does.
func (l Layout) Compose(tick, worker, seq int64) int64 {
	return tick<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | seq
}

// Parts is a decoded ID.
type Parts struct {
	ID       int64     `json:"id,string"`
	Tick     int64     `json:"tick"`
	Time     time.Time `json:"time"`
	WorkerID int64     `json:"worker_id"`
	// Sequence is the per-tick counter: the sequence field without its
	// gene bits.
	Sequence int64 `json:"sequence"`
	// Gene is the gene field (the low GeneBits bits); nil when the layout
	// has none.
	Gene *int64 `json:"gene,omitempty"`
}

// UnixMilli returns the ID's timestamp in Unix milliseconds.
func (p Parts) UnixMilli() int64 { return p.Time.UnixMilli() }

// Decode splits an ID into its timestamp, worker and sequence.
func (l Layout) Decode(id int64) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	}
	if id > l.MaxID() {
		return Parts{}, fmt.Errorf("%w: %d is above %d, the largest ID of layout %s", ErrInvalidID, id, l.MaxID(), l)
	}
	tick := id >> (l.WorkerBits + l.SequenceBits)
	// In milliseconds: TickStart's nanoseconds overflow after 2262, which
	// e.g. 41 bits of 10ms reach.
	ms, ok := l.tickStartMilli(tick)
	if !ok {
		return Parts{}, fmt.Errorf("%w: %d: its timestamp is beyond any representable time", ErrInvalidID, id)
	}
	p := Parts{
		ID:       id,
		Tick:     tick,
		Time:     time.UnixMilli(ms).UTC(),
		WorkerID: (id >> l.SequenceBits) & l.MaxWorkerID(),
		Sequence: (id & l.MaxSequence()) >> l.GeneBits,
	}
	if l.GeneBits > 0 {
		gene := id & l.MaxGene()
		p.Gene = &gene
	}
	return p, nil
}

// layoutJSON is the wire form of a Layout in the cluster znode and cache file.
type layoutJSON struct {
	Layout   string `json:"layout"`
	Epoch    string `json:"epoch"`
	TimeUnit string `json:"time_unit"`
	GeneBits uint   `json:"gene_bits,omitempty"`
}

// MarshalJSON encodes the layout as {"layout":"41/10/12","epoch":"…",
// "time_unit":"1ms"}, with "gene_bits":K when it has gene bits (a reader
// that predates them sees no such field for a layout without).
func (l Layout) MarshalJSON() ([]byte, error) {
	return json.Marshal(layoutJSON{Layout: l.bits(), Epoch: l.Epoch.UTC().Format(time.RFC3339Nano), TimeUnit: l.Unit.String(), GeneBits: l.GeneBits})
}

// UnmarshalJSON decodes the form MarshalJSON writes and checks its shape
// (not the epoch against the clock: call Validate for that).
func (l *Layout) UnmarshalJSON(b []byte) error {
	var w layoutJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidLayout, err)
	}
	got, err := parseFields(w.Layout, w.Epoch, w.TimeUnit)
	if err != nil {
		return err
	}
	got.GeneBits = w.GeneBits
	if err := got.validateShape(); err != nil {
		return err
	}
	*l = got
	return nil
}
