package server

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendID: appendID writes what strconv.AppendInt writes, at every
// length and at the edges of its fast path and of each block.
func TestAppendID(t *testing.T) {
	tests := []int64{
		math.MinInt64, -1e17, -1, 0, 1, 9, 10, 99, 100, 12345678, 99999999, 1e8,
		1e16 - 1, 1e16, 1e16 + 1, 1e16 + 99999999, 1e16 + 1e8, 1e17 - 1, 1e17, 1e18 - 1, 1e18,
		1234567890123456789, 9_000_000_000_000_000_000, 9_220_000_000_000_000_000,
		9_223_372_036_800_000_000, 9_223_372_036_854_775_807,
		10_000_000_099_999_999, 10_000_000_000_000_010, 10_099_999_990_000_001,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		tests = append(tests, r.Int64(), r.Int64N(1e17), r.Int64N(1e9))
	}
	for _, id := range tests {
		pre := []byte("x")
		got := appendID(pre, id)
		if want := strconv.AppendInt([]byte("x"), id, 10); string(got) != string(want) {
			t.Fatalf("appendID(%d) = %q, want %q", id, got, want)
		}
	}
}

// TestEightDigits checks the block conversion for every value in a range
// around each power of ten and a spread of the others.
func TestEightDigits(t *testing.T) {
	check := func(x uint32) {
		t.Helper()
		var b [8]byte
		v := eightDigits(x)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		if want := strconv.FormatUint(uint64(x)+1e8, 10)[1:]; string(b[:]) != want {
			t.Fatalf("eightDigits(%d) = %q, want %q", x, b, want)
		}
	}
	for p := uint32(1); p <= 1e8; p *= 10 {
		for x := p - min(p, 1000); x < min(p+1000, 1e8); x++ {
			check(x)
		}
	}
	for x := uint32(0); x < 1e8; x += 997 {
		check(x)
	}
}

func BenchmarkAppendID(b *testing.B) {
	var buf [32]byte
	id := int64(1234567890123456789)
	b.Run("appendID", func(b *testing.B) {
		for b.Loop() {
			_ = appendID(buf[:0], id)
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			_ = strconv.AppendInt(buf[:0], id, 10)
		}
	})
}
