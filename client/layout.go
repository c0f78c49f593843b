package client

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidID is wrapped by Layout.Decode's errors: the ID cannot belong to
// the layout, or the layout itself is not one a node accepts.
var ErrInvalidID = errors.New("invalid id")

// DefaultEpoch is a node's default start of time: 2024-01-01T00:00:00Z.
var DefaultEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Layout is the bit split of a cluster's IDs, as a node's GET /clock shows
// it (layout "41/10/12", epoch, time_unit) with the cluster's gene bits
// (--gene-bits). Decode splits an ID with it as GET /decode/{id} does,
// without a request.
type Layout struct {
	TimeBits     uint          // bits of the timestamp field (ticks since Epoch)
	WorkerBits   uint          // bits of the worker ID
	SequenceBits uint          // bits of the per-tick sequence, gene bits included
	GeneBits     uint          // the low bits of the sequence given to a gene (0..10)
	Epoch        time.Time     // tick 0
	Unit         time.Duration // one tick: a whole number of milliseconds, 1ms to 1h
}

// DefaultLayout is a node's default: 41/10/12, 1 ms ticks from DefaultEpoch,
// no gene bits.
func DefaultLayout() Layout {
	return Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Epoch: DefaultEpoch, Unit: time.Millisecond}
}

// Parts is a decoded ID: the fields of GET /decode/{id}.
type Parts struct {
	// UnixMilli is the start of the ID's tick in Unix milliseconds.
	UnixMilli int64
	// WorkerID is the worker that issued the ID.
	WorkerID int64
	// Sequence is the per-tick counter, without the gene bits.
	Sequence int64
	// Gene is the gene field (the low GeneBits bits); 0 without gene bits.
	Gene int64
}

// Time is the start of the ID's tick, in UTC.
func (p Parts) Time() time.Time { return time.UnixMilli(p.UnixMilli).UTC() }

// validate reports a layout no node accepts (the rules of the node's
// --layout, --epoch, --time-unit and --gene-bits).
func (l Layout) validate() error {
	switch {
	case l.TimeBits > 63 || l.WorkerBits > 63 || l.SequenceBits > 63 || l.TimeBits+l.WorkerBits+l.SequenceBits > 63:
		return fmt.Errorf("%w: layout %d/%d/%d: at most 63 bits fit a positive int64", ErrInvalidID, l.TimeBits, l.WorkerBits, l.SequenceBits)
	case l.TimeBits < 20 || l.SequenceBits == 0:
		return fmt.Errorf("%w: layout %d/%d/%d: want at least 20 time bits and 1 sequence bit", ErrInvalidID, l.TimeBits, l.WorkerBits, l.SequenceBits)
	case l.GeneBits > 10 || l.GeneBits > l.SequenceBits:
		return fmt.Errorf("%w: %d gene bits: want 0..10 and at most the %d sequence bits", ErrInvalidID, l.GeneBits, l.SequenceBits)
	case l.Unit < time.Millisecond || l.Unit > time.Hour || l.Unit%time.Millisecond != 0:
		return fmt.Errorf("%w: time unit %s: want a whole number of milliseconds from 1ms to 1h", ErrInvalidID, l.Unit)
	}
	return nil
}

// Decode splits id into its tick's time, worker and sequence (and gene),
// as GET /decode/{id} does on a node of this layout. A negative ID, one
// above the layout's largest, or a layout no node accepts is an error
// wrapping ErrInvalidID.
func (l Layout) Decode(id int64) (Parts, error) {
	if err := l.validate(); err != nil {
		return Parts{}, err
	}
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	}
	shift := l.WorkerBits + l.SequenceBits
	if maxID := int64(uint64(1)<<(l.TimeBits+shift) - 1); id > maxID {
		return Parts{}, fmt.Errorf("%w: %d is above %d, the largest ID of layout %d/%d/%d", ErrInvalidID, id, maxID, l.TimeBits, l.WorkerBits, l.SequenceBits)
	}
	tick := id >> shift
	unit := int64(l.Unit / time.Millisecond)
	epoch := l.Epoch.UnixMilli()
	if tick > (math.MaxInt64-max(epoch, 0))/unit {
		return Parts{}, fmt.Errorf("%w: %d: its timestamp is beyond any representable time", ErrInvalidID, id)
	}
	seq := id & (1<<l.SequenceBits - 1)
	return Parts{
		UnixMilli: epoch + tick*unit,
		WorkerID:  (id >> l.SequenceBits) & (1<<l.WorkerBits - 1),
		Sequence:  seq >> l.GeneBits,
		Gene:      seq & (1<<l.GeneBits - 1),
	}, nil
}
