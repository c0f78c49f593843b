package segment

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Opaque IDs: a tag created with --opaque --digits D hands out D-digit
// decimal numbers (no leading zero) instead of its dense counter. The
// number for the counter's i-th value is 10^(D-1) + P(i), where P is a
// keyed permutation of 0..N-1, N = 9×10^(D-1): unique because the counter
// is and P is a bijection, unrelated to its neighbours and to the volume
// because P is a pseudorandom permutation under a key only the cluster's
// credentials can read.
//
// P is a balanced Feistel network on 2h bits (the fewest with 2^(2h) >= N;
// under 4N) with AES-128 as the round function, made to stay inside 0..N-1
// by cycle walking: apply the network until the value falls below N. A
// Feistel network is a bijection of its 2h-bit domain for any round
// function, and cycle walking restricts a bijection of a superset to one of
// the subset (each walk stays on the cycle of its start, and leaves it at
// the first value below N). The inverse runs the rounds backwards, walking
// the same way.

// Limits of Opaque.Digits.
const (
	MinOpaqueDigits = 6
	MaxOpaqueDigits = 18
	// OpaqueKeySize is the size of a tag's key (AES-128).
	OpaqueKeySize = 16
	// feistelRounds: Luby-Rackoff needs 4 for a pseudorandom permutation;
	// more cost little here.
	feistelRounds = 10
)

// Opaque is the opaque form of a tag's IDs (nil in a plain tag).
type Opaque struct {
	Digits int `json:"digits"`
}

// Size is how many IDs the tag can hand out: 9×10^(Digits-1).
func (o Opaque) Size() int64 { return 9 * pow10(o.Digits-1) }

func (o Opaque) check() error {
	if o.Digits < MinOpaqueDigits || o.Digits > MaxOpaqueDigits {
		return fmt.Errorf("opaque digits %d: want %d..%d", o.Digits, MinOpaqueDigits, MaxOpaqueDigits)
	}
	return nil
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// Permutation is the keyed bijection of an opaque tag.
type Permutation struct {
	n     uint64 // domain 0..n-1
	h     uint   // bits per half
	mask  uint64 // h bits
	block cipher.Block
	low   int64 // 10^(Digits-1)
}

// NewPermutation returns the permutation of an opaque tag with key.
func NewPermutation(o Opaque, key []byte) (*Permutation, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if len(key) != OpaqueKeySize {
		return nil, fmt.Errorf("opaque key of %d bytes, want %d", len(key), OpaqueKeySize)
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return newPermutation(uint64(o.Size()), blk, pow10(o.Digits-1)), nil
}

func newPermutation(n uint64, blk cipher.Block, low int64) *Permutation {
	b := uint(bits.Len64(n - 1))
	h := (b + 1) / 2
	return &Permutation{n: n, h: h, mask: 1<<h - 1, block: blk, low: low}
}

// round is the round function: AES of (round, half), cut to h bits.
func (p *Permutation) round(r int, x uint64) uint64 {
	var in, out [16]byte
	in[0] = byte(r)
	binary.BigEndian.PutUint64(in[8:], x)
	p.block.Encrypt(out[:], in[:])
	return binary.BigEndian.Uint64(out[:8]) & p.mask
}

func (p *Permutation) forward(x uint64) uint64 {
	l, r := x>>p.h, x&p.mask
	for i := range feistelRounds {
		l, r = r, l^p.round(i, r)
	}
	return l<<p.h | r
}

func (p *Permutation) backward(x uint64) uint64 {
	l, r := x>>p.h, x&p.mask
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = r^p.round(i, l), l
	}
	return l<<p.h | r
}

// Map returns P(i) for 0 <= i < N.
func (p *Permutation) Map(i uint64) uint64 {
	x := p.forward(i)
	for x >= p.n {
		x = p.forward(x)
	}
	return x
}

// unmap returns i with Map(i) == x, for 0 <= x < N.
func (p *Permutation) unmap(x uint64) uint64 {
	i := p.backward(x)
	for i >= p.n {
		i = p.backward(i)
	}
	return i
}

// ID is the opaque number of the tag's i-th ID (i from 0).
func (p *Permutation) ID(i int64) (int64, error) {
	if i < 0 || uint64(i) >= p.n {
		return 0, fmt.Errorf("%w: all %d numbers of %d digits are handed out", ErrExhausted, p.n, digits(p.low))
	}
	return p.low + int64(p.Map(uint64(i))), nil
}

// Index is the counter position of an opaque number: the inverse of ID.
func (p *Permutation) Index(id int64) (int64, error) {
	if id < p.low || id-p.low >= int64(p.n) {
		return 0, fmt.Errorf("%d is not a %d-digit number", id, digits(p.low))
	}
	return int64(p.unmap(uint64(id - p.low))), nil
}

func digits(low int64) int {
	d := 1
	for low >= 10 {
		low /= 10
		d++
	}
	return d
}
