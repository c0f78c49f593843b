// Package idtext writes snowflake IDs and UUIDs as fixed-width strings in
// base62, base58, base36 or Crockford's base32, and reads them back.
//
// Every alphabet is in ASCII order and every string of a given value size
// has the same width (left-padded with the alphabet's zero digit), so the
// strings sort, byte by byte (sort.Strings, bytes.Compare, a database's
// binary collation), exactly as the numbers do.
//
// The width for values of B bits is the fewest digits d with base^d ≥ 2^B:
// for the default snowflake layout (63 bits) 11 in base62 and base58, 13
// in base36 and base32; for a UUID (128 bits) 22, 22, 25 and 26.
//
// Decoding takes exactly that width, every character in the alphabet
// (base36 and base32 in either case; base32 also reads I and L as 1 and O
// as 0, Crockford's rule) and a value below 2^B. The package imports
// nothing outside the standard library.
package idtext

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// Encoding is one of the four alphabets. The zero value is no encoding:
// its methods fail with ErrEncoding.
type Encoding uint8

// The encodings.
const (
	// Base62 is 0-9, A-Z, a-z: the shortest strings, case-sensitive.
	Base62 Encoding = iota + 1
	// Base58 is Bitcoin's alphabet (no 0, O, I, l): no look-alike
	// characters, case-sensitive.
	Base58
	// Base36 is 0-9, a-z, written in lower case and read in either.
	Base36
	// Base32 is Crockford's base32, 0-9 and A-Z without I, L, O and U,
	// written in upper case and read in either (I and L as 1, O as 0).
	Base32
)

// Encodings lists every encoding, in the order the API names them.
var Encodings = [...]Encoding{Base62, Base58, Base36, Base32}

// MaxBits is the largest value size: a UUID's 128 bits.
const MaxBits = 128

// UUIDBits is the size of a UUID.
const UUIDBits = 128

// Errors. Every error of Parse, Encoding's methods wraps one of them.
var (
	// ErrEncoding: no such encoding (a name Parse does not know, or an
	// Encoding that is none of the constants).
	ErrEncoding = errors.New("unknown encoding")
	// ErrWidth: a string that is not exactly the width of its value size.
	ErrWidth = errors.New("wrong width")
	// ErrChar: a character that is not a digit of the encoding.
	ErrChar = errors.New("not a digit of the encoding")
	// ErrRange: a value of 2^bits or more (or a value size outside
	// 1..MaxBits).
	ErrRange = errors.New("value out of range")
)

var (
	names     = [...]string{Base62: "base62", Base58: "base58", Base36: "base36", Base32: "base32"}
	alphabets = [...]string{
		Base62: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
		Base58: "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
		Base36: "0123456789abcdefghijklmnopqrstuvwxyz",
		Base32: "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
	}
	// digits[e][c] is the value of character c in e, or -1.
	digits [len(alphabets)][256]int8
	// widths[e][b] is the width of a value of b bits in e.
	widths [len(alphabets)][MaxBits + 1]uint8
)

func init() {
	for _, e := range Encodings {
		d := &digits[e]
		for c := range d {
			d[c] = -1
		}
		a := alphabets[e]
		for i := range len(a) {
			d[a[i]] = int8(i)
		}
		switch e {
		case Base36: // read in either case
			for i := 10; i < len(a); i++ {
				d[a[i]-'a'+'A'] = int8(i)
			}
		case Base32: // read in either case; I, L as 1, O as 0 (Crockford)
			for i := 10; i < len(a); i++ {
				d[a[i]-'A'+'a'] = int8(i)
			}
			d['I'], d['i'], d['L'], d['l'] = 1, 1, 1, 1
			d['O'], d['o'] = 0, 0
		}
		// The width of b bits: how many digits 2^b - 1 has.
		base := uint64(len(a))
		for b := 1; b <= MaxBits; b++ {
			hi, lo := uint64(0), ^uint64(0)
			switch {
			case b < 64:
				lo = 1<<b - 1
			case b > 64:
				hi = 1<<(b-64) - 1
			}
			n := uint8(0)
			for hi != 0 || lo != 0 {
				hi, lo, _ = divmod(hi, lo, base)
				n++
			}
			widths[e][b] = n
		}
	}
}

// divmod divides the 128-bit number hi:lo by b (b > 0).
func divmod(hi, lo, b uint64) (qhi, qlo, r uint64) {
	qhi, r = hi/b, hi%b
	qlo, r = bits.Div64(r, lo, b)
	return qhi, qlo, r
}

// Parse returns the encoding of a name: base62, base58, base36 or base32
// (exactly, in lower case).
func Parse(name string) (Encoding, error) {
	for _, e := range Encodings {
		if names[e] == name {
			return e, nil
		}
	}
	return 0, fmt.Errorf("%w %q: want base62, base58, base36 or base32", ErrEncoding, name)
}

// ParseBytes is Parse of a []byte, without allocating.
func ParseBytes(name []byte) (Encoding, bool) {
	for _, e := range Encodings {
		if names[e] == string(name) {
			return e, true
		}
	}
	return 0, false
}

// valid reports whether e is one of the constants.
func (e Encoding) valid() bool { return e >= Base62 && e <= Base32 }

// String is the encoding's name, e.g. "base62".
func (e Encoding) String() string {
	if !e.valid() {
		return "Encoding(" + strconv.Itoa(int(e)) + ")"
	}
	return names[e]
}

// Alphabet returns the encoding's digits, the digit of value 0 first, in
// ASCII order ("" for no encoding).
func (e Encoding) Alphabet() string {
	if !e.valid() {
		return ""
	}
	return alphabets[e]
}

// Width is the length of the strings of values of the given size in bits
// (1..MaxBits); 0 for a size outside that or no encoding.
func (e Encoding) Width(bits uint) int {
	if !e.valid() || bits < 1 || bits > MaxBits {
		return 0
	}
	return int(widths[e][bits])
}

// AppendUint appends v, a value of the given size in bits (1..64), in e's
// fixed width. A v of 2^bits or more is an error wrapping ErrRange, as is
// a size outside 1..64; no encoding is ErrEncoding. It does not allocate
// but for an error.
func (e Encoding) AppendUint(dst []byte, v uint64, bits uint) ([]byte, error) {
	switch {
	case !e.valid():
		return dst, fmt.Errorf("%w: %d", ErrEncoding, uint8(e))
	case bits < 1 || bits > 64:
		return dst, fmt.Errorf("%w: %d bits: want 1 to 64", ErrRange, bits)
	case bits < 64 && v>>bits != 0:
		return dst, fmt.Errorf("%w: %d does not fit %d bits", ErrRange, v, bits)
	}
	var buf [64]byte
	w := int(widths[e][bits])
	a := alphabets[e]
	base := uint64(len(a))
	for i := w - 1; i >= 0; i-- {
		buf[i] = a[v%base]
		v /= base
	}
	return append(dst, buf[:w]...), nil
}

// EncodeUint is AppendUint to a new string.
func (e Encoding) EncodeUint(v uint64, bits uint) (string, error) {
	var buf [64]byte
	b, err := e.AppendUint(buf[:0], v, bits)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendUUID appends the 16 bytes of u, read as one big-endian 128-bit
// number, in e's fixed width for 128 bits. No encoding is ErrEncoding.
func (e Encoding) AppendUUID(dst []byte, u [16]byte) ([]byte, error) {
	if !e.valid() {
		return dst, fmt.Errorf("%w: %d", ErrEncoding, uint8(e))
	}
	hi, lo := be64(u[0:8]), be64(u[8:16])
	var buf [MaxBits]byte
	w := int(widths[e][UUIDBits])
	a := alphabets[e]
	base := uint64(len(a))
	for i := w - 1; i >= 0; i-- {
		var r uint64
		hi, lo, r = divmod(hi, lo, base)
		buf[i] = a[r]
	}
	return append(dst, buf[:w]...), nil
}

// EncodeUUID is AppendUUID to a new string.
func (e Encoding) EncodeUUID(u [16]byte) (string, error) {
	var buf [32]byte
	b, err := e.AppendUUID(buf[:0], u)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// DecodeUint reads s, a value of the given size in bits (1..64) in e's
// fixed width. Errors wrap ErrChar (a character outside the alphabet,
// named with its position; checked first), ErrWidth (s is not exactly
// Width(bits) long),
// ErrRange (a value of 2^bits or more) or ErrEncoding.
func (e Encoding) DecodeUint(s string, bits uint) (uint64, error) {
	if bits < 1 || bits > 64 {
		if !e.valid() {
			return 0, fmt.Errorf("%w: %d", ErrEncoding, uint8(e))
		}
		return 0, fmt.Errorf("%w: %d bits: want 1 to 64", ErrRange, bits)
	}
	hi, lo, err := e.decode(s, bits)
	if err != nil {
		return 0, err
	}
	_ = hi // zero: decode checked the value against 2^bits
	return lo, nil
}

// DecodeUUID reads s, a UUID's 16 bytes as a big-endian 128-bit number in
// e's fixed width for 128 bits. Errors as DecodeUint's.
func (e Encoding) DecodeUUID(s string) ([16]byte, error) {
	var u [16]byte
	hi, lo, err := e.decode(s, UUIDBits)
	if err != nil {
		return u, err
	}
	put64(u[0:8], hi)
	put64(u[8:16], lo)
	return u, nil
}

// decode reads s as a value of size bits (1..128) in e.
func (e Encoding) decode(s string, size uint) (hi, lo uint64, err error) {
	if !e.valid() {
		return 0, 0, fmt.Errorf("%w: %d", ErrEncoding, uint8(e))
	}
	d := &digits[e]
	for i := range len(s) { // a bad character first: it says more than the width
		if d[s[i]] < 0 {
			return 0, 0, fmt.Errorf("%w: %s %s: %s at position %d is not a %s digit", ErrChar, e, quote(s), quoteChar(s, i), i+1, e)
		}
	}
	w := int(widths[e][size])
	if len(s) != w {
		return 0, 0, fmt.Errorf("%w: %s %s has %d characters, want %d (%d bits)", ErrWidth, e, quote(s), len(s), w, size)
	}
	base := uint64(len(alphabets[e]))
	over := false
	for i := range len(s) {
		v := d[s[i]]
		// hi:lo = hi:lo * base + v, noting a carry out of 128 bits.
		h1, h0 := bits.Mul64(hi, base)
		l1, l0 := bits.Mul64(lo, base)
		var c uint64
		hi, c = bits.Add64(h0, l1, 0)
		over = over || h1 != 0 || c != 0
		lo, c = bits.Add64(l0, uint64(v), 0)
		hi, c = bits.Add64(hi, 0, c)
		over = over || c != 0
	}
	switch {
	case over, size < 64 && (hi != 0 || lo>>size != 0), size >= 64 && size < 128 && hi>>(size-64) != 0:
		return 0, 0, fmt.Errorf("%w: %s %s is 2^%d or more: not a value of %d bits", ErrRange, e, quote(s), size, size)
	}
	return hi, lo, nil
}

// quote quotes s for an error message, cut at 40 bytes.
func quote(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

// quoteChar names the character at byte i of s: the rune there (the byte
// when s is not UTF-8 there), quoted.
func quoteChar(s string, i int) string {
	for j, r := range s {
		if j == i {
			if r == 0xfffd {
				return fmt.Sprintf("byte 0x%02x", s[i])
			}
			return strconv.QuoteRune(r)
		}
		if j > i {
			break
		}
	}
	return fmt.Sprintf("byte 0x%02x", s[i])
}

func be64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func put64(b []byte, v uint64) {
	_ = b[7]
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}
