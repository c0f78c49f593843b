package segment

import (
	"bytes"
	"crypto/aes"
	"errors"
	"math"
	"strconv"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, OpaqueKeySize) }

// The permutation is a bijection: exhaustively on small domains and on the
// whole 6-digit domain (900,000 values); Unmap inverts Map.
func TestPermutationBijection(t *testing.T) {
	blk, _ := aes.NewCipher(testKey(7))
	for _, n := range []uint64{1, 2, 3, 10, 97, 1000, 4097} {
		p := newPermutation(n, blk, 0)
		seen := make([]bool, n)
		for i := range n {
			x := p.Map(i)
			if x >= n || seen[x] {
				t.Fatalf("n=%d: Map(%d) = %d: out of range or taken twice", n, i, x)
			}
			seen[x] = true
			if back := p.unmap(x); back != i {
				t.Fatalf("n=%d: Unmap(Map(%d)) = %d", n, i, back)
			}
		}
	}
	p, err := NewPermutation(Opaque{Digits: 6}, testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, 900_000)
	for i := range int64(900_000) {
		id, err := p.ID(i)
		if err != nil || id < 100_000 || id > 999_999 || seen[id-100_000] {
			t.Fatalf("ID(%d) = %d, %v: not a fresh 6-digit number", i, id, err)
		}
		seen[id-100_000] = true
		if i%9973 == 0 {
			if back, err := p.Index(id); err != nil || back != i {
				t.Fatalf("Index(ID(%d)) = %d, %v", i, back, err)
			}
		}
	}
	if _, err := p.ID(900_000); !errors.Is(err, ErrExhausted) {
		t.Errorf("ID past the domain: %v, want ErrExhausted", err)
	}
	if _, err := p.Index(99_999); err == nil {
		t.Error("Index of a 5-digit number accepted")
	}
}

// Neighbours are unrelated and no volume shows: consecutive numbers of the
// counter are uncorrelated, the leading digit is uniform over 1-9, and
// another key gives another order.
func TestPermutationSpread(t *testing.T) {
	for _, d := range []int{6, 12, 18} {
		p, err := NewPermutation(Opaque{Digits: d}, testKey(3))
		if err != nil {
			t.Fatal(err)
		}
		const n = 100_000
		var sx, sy, sxx, syy, sxy float64
		lead := make([]int, 10)
		prev, _ := p.ID(0)
		for i := int64(1); i <= n; i++ {
			id, err := p.ID(i)
			if err != nil || len(strconv.FormatInt(id, 10)) != d {
				t.Fatalf("D=%d: ID(%d) = %d, %v", d, i, id, err)
			}
			x, y := float64(prev), float64(id)
			sx, sy, sxx, syy, sxy = sx+x, sy+y, sxx+x*x, syy+y*y, sxy+x*y
			lead[strconv.FormatInt(id, 10)[0]-'0']++
			prev = id
		}
		r := (n*sxy - sx*sy) / math.Sqrt((n*sxx-sx*sx)*(n*syy-sy*sy))
		if math.Abs(r) > 0.02 { // |r| of independent values: about 1/sqrt(n) = 0.003
			t.Errorf("D=%d: correlation of neighbours %.4f", d, r)
		}
		want := float64(n) / 9
		chi := 0.0
		for _, c := range lead[1:] {
			chi += (float64(c) - want) * (float64(c) - want) / want
		}
		if chi > 26.1 { // 0.999 quantile of chi-squared, 8 degrees of freedom
			t.Errorf("D=%d: leading digits %v, chi-squared %.1f", d, lead[1:], chi)
		}
		t.Logf("D=%d: neighbour correlation %.4f, leading-digit chi-squared %.1f over %d IDs", d, r, chi, n)
	}
	a, _ := NewPermutation(Opaque{Digits: 8}, testKey(1))
	b, _ := NewPermutation(Opaque{Digits: 8}, testKey(2))
	same := 0
	for i := range int64(1000) {
		x, _ := a.ID(i)
		y, _ := b.ID(i)
		if x == y {
			same++
		}
	}
	if same > 2 {
		t.Errorf("two keys agree on %d of 1000 numbers", same)
	}
	for _, d := range []int{5, 19} {
		if _, err := NewPermutation(Opaque{Digits: d}, testKey(1)); err == nil {
			t.Errorf("%d digits accepted", d)
		}
	}
	if _, err := NewPermutation(Opaque{Digits: 8}, []byte("short")); err == nil {
		t.Error("a short key accepted")
	}
}

// BenchmarkPermutationID: the cost an opaque tag adds per number.
func BenchmarkPermutationID(b *testing.B) {
	for _, d := range []int{6, 18} {
		p, err := NewPermutation(Opaque{Digits: d}, testKey(5))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strconv.Itoa(d)+"digits", func(b *testing.B) {
			var i int64
			for b.Loop() {
				if _, err := p.ID(i % p.low); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
