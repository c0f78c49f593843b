// Package uuidv7 turns snowflake IDs into RFC 9562 version 7 UUIDs that are
// unique by construction, not by chance.
//
// A UUIDv7 is 48 bits of Unix milliseconds (unix_ts_ms), the version (7),
// 12 bits rand_a, the variant (binary 10) and 62 bits rand_b. Here
// unix_ts_ms is the start of the snowflake ID's tick, and the ID's worker
// and sequence fields (W+S bits) fill the top of rand_a and rand_b; the
// rest, at least 32 bits, is random:
//
//	unix_ts_ms (48) | 0111 | worker, sequence (W+S) | 10 | random (74-W-S)
//	                         '--- rand_a (12) + rand_b (62), variant between ---'
//
// The tick (from unix_ts_ms) and the worker and sequence give back the ID,
// so two UUIDs made from different IDs differ: the encoding is injective,
// and the uniqueness of UUIDs is the uniqueness of the fenced snowflake IDs
// they come from. The bits after unix_ts_ms are in the ID's own order
// (worker, then sequence), so the UUIDs of one node increase with its IDs,
// as bytes and as canonical strings.
package uuidv7

import (
	"encoding/binary"
	"errors"
	"fmt"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// UUID is a UUID's 16 bytes, in network order.
type UUID [16]byte

// Errors of NewCodec, Parse and Codec.Decode. ErrInvalid is the wire
// contract's: Parse's errors are wire.ParseUUID's.
var (
	ErrLayout  = errors.New("uuidv7: layout does not fit")
	ErrInvalid = wire.ErrInvalidUUID
)

// payloadBits is what rand_a and rand_b hold together; MinRandomBits are
// kept random whatever the layout.
const (
	payloadBits   = 74
	MinRandomBits = 32
	// MaxFieldBits bounds the layout's worker and sequence bits together.
	MaxFieldBits = payloadBits - MinRandomBits
)

// Codec encodes and decodes the UUIDs of one layout.
type Codec struct {
	layout snowflake.Layout
	n      uint                // W+S
	epoch  snowflake.UnixMilli // the layout's epoch
	unitMs int64               // the layout's tick, in milliseconds
}

// NewCodec returns the codec of layout l. Its worker and sequence fields
// must fit MaxFieldBits (every layout with at least 21 time bits does).
func NewCodec(l snowflake.Layout) (Codec, error) {
	n := l.WorkerBits + l.SequenceBits
	if n > MaxFieldBits {
		return Codec{}, fmt.Errorf("%w: layout %s has %d worker and sequence bits, at most %d fit a UUIDv7 with %d random bits", ErrLayout, l, n, MaxFieldBits, MinRandomBits)
	}
	return Codec{layout: l, n: n, epoch: snowflake.UnixMilliOf(l.Epoch), unitMs: l.Unit.Milliseconds()}, nil
}

// RandomBits is how many bits of each UUID are random: 74 - (W+S).
func (c Codec) RandomBits() uint { return payloadBits - c.n }

// Encode returns the UUID of snowflake ID id, with random's low
// RandomBits bits as its random part. id must be an ID of the codec's
// layout (not negative).
func (c Codec) Encode(id int64, random uint64) UUID {
	tick := id >> c.n
	ms := uint64(c.epoch + snowflake.UnixMilli(tick*c.unitMs))
	p := uint64(id) & (1<<c.n - 1)
	r := random & (1<<(payloadBits-c.n) - 1)
	// The 74-bit field p<<(74-n) | r, split into rand_a (top 12) and
	// rand_b (low 62).
	var randA, randB uint64
	if c.n <= 12 {
		randA = p<<(12-c.n) | r>>62
		randB = r & (1<<62 - 1)
	} else {
		k := c.n - 12 // bits of p in rand_b
		randA = p >> k
		randB = (p&(1<<k-1))<<(62-k) | r
	}
	var u UUID
	binary.BigEndian.PutUint64(u[0:8], ms<<16|0x7<<12|randA)
	binary.BigEndian.PutUint64(u[8:16], 0b10<<62|randB)
	return u
}

// Decode returns the snowflake ID u was made from, if this codec's layout
// made it. It checks u's form only, and fails for a UUID that is not
// version 7 with the RFC variant, whose time is before the layout's epoch or
// not the start of one of its ticks, or whose tick is past the layout's
// end. It cannot tell a UUID made by Encode from any other version 7 UUID
// of such a time: with ticks of 1 ms (the default layout) every version 7
// UUID from after the epoch decodes, its random bits read as a worker and
// sequence. Nothing in a UUID proves where it was made.
func (c Codec) Decode(u UUID) (int64, error) {
	hi, lo := binary.BigEndian.Uint64(u[0:8]), binary.BigEndian.Uint64(u[8:16])
	switch {
	case hi>>12&0xf != 7:
		return 0, fmt.Errorf("%w: %s is version %d, not 7", ErrInvalid, u, hi>>12&0xf)
	case lo>>62 != 0b10:
		return 0, fmt.Errorf("%w: %s does not have the RFC 9562 variant", ErrInvalid, u)
	}
	ms := snowflake.UnixMilli(hi >> 16)
	d := int64(ms - c.epoch) // milliseconds since the epoch
	if d < 0 || d%c.unitMs != 0 {
		return 0, fmt.Errorf("%w: %s: its time %d ms is not a tick of layout %s", ErrInvalid, u, ms, c.layout.Describe())
	}
	tick := d / c.unitMs
	if tick > c.layout.MaxTick() {
		return 0, fmt.Errorf("%w: %s: its time is past the end of layout %s", ErrInvalid, u, c.layout)
	}
	randA, randB := hi&0xfff, lo&(1<<62-1)
	var p uint64
	if c.n <= 12 {
		p = randA >> (12 - c.n)
	} else {
		k := c.n - 12
		p = randA<<k | randB>>(62-k)
	}
	return tick<<c.n | int64(p), nil
}

// String is the canonical form: 36 lower-case characters, 8-4-4-4-12.
func (u UUID) String() string { return string(u.AppendText(nil)) }

// AppendText appends the canonical form to b (wire.AppendUUID).
func (u UUID) AppendText(b []byte) []byte { return wire.AppendUUID(b, u) }

// Parse reads the canonical form (either case). It checks the form, not
// the version: Decode does. Its errors wrap ErrInvalid.
func Parse(s string) (UUID, error) { return wire.ParseUUID(s) }
