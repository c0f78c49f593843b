package snowflake_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// geneLayout is the default layout with k gene bits.
func geneLayout(k uint) snowflake.Layout {
	l := snowflake.DefaultLayout()
	l.GeneBits = k
	return l
}

// An ID asked for with a gene ends in it; IDs keep strictly increasing and
// decode to their gene and counter; a tick holds 2^(S-K) IDs.
func TestGeneBits(t *testing.T) {
	for _, k := range []uint{1, 4, 10} {
		l := geneLayout(k)
		clk := newFake(t)
		g := newGen(t, snowflake.Config{Layout: l, WorkerID: 7, Clock: clk})
		mask := int64(1)<<k - 1
		var last int64
		for i := range 3000 {
			if i%2 == 0 {
				clk.Advance(time.Millisecond) // at most 2 IDs a tick: fits 2^(12-10)
			}
			gene := uint64(rand.Int64()) // e.g. a user ID
			var id int64
			var err error
			switch i % 3 {
			case 0:
				id, err = g.NextGene(gene)
			case 1:
				var ids []int64
				ids, err = g.AppendNGene(nil, 1, gene)
				if err == nil {
					id = ids[0]
				}
			default:
				id, err = g.Next()
			}
			if err != nil {
				t.Fatal(err)
			}
			if i%3 != 2 && id&mask != int64(gene)&mask {
				t.Fatalf("k=%d: id %d ends in %d, gene %d ends in %d", k, id, id&mask, gene, int64(gene)&mask)
			}
			if id <= last {
				t.Fatalf("k=%d: id %d after %d", k, id, last)
			}
			last = id
			p, err := l.Decode(id)
			if err != nil || p.Gene == nil || *p.Gene != id&mask || p.WorkerID != 7 {
				t.Fatalf("k=%d: decode %d: %+v, %v", k, id, p, err)
			}
		}
		// One tick's capacity: 2^(12-k) IDs with counters 0..2^(12-k)-1.
		clk.Advance(time.Second)
		ids, err := g.AppendNGene(nil, int(l.PerTick()), 5)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := l.Decode(ids[0])
		lastInTick, _ := l.Decode(ids[len(ids)-1])
		if l.PerTick() != 1<<(12-k) || first.Tick != lastInTick.Tick || first.Sequence != 0 || lastInTick.Sequence != l.PerTick()-1 {
			t.Errorf("k=%d: per tick %d; first %+v, last %+v", k, l.PerTick(), first, lastInTick)
		}
	}
}

// Goroutines asking with and without genes at once never get the same ID.
func TestGeneBitsConcurrentUnique(t *testing.T) {
	clk := newFake(t)
	clk.SetAutoStep(10 * time.Microsecond) // time moves on: a tick holds only 64 IDs
	g := newGen(t, snowflake.Config{Layout: geneLayout(6), WorkerID: 1, Clock: clk})
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			var mine []int64
			for i := range 2000 {
				var id int64
				var err error
				if (w+i)%2 == 0 {
					id, err = g.NextGene(uint64(i % 3))
				} else {
					id, err = g.Next()
				}
				if err != nil {
					t.Error(err)
					return
				}
				mine = append(mine, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range mine {
				if seen[id] {
					t.Errorf("duplicate %d", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

// chiSquare of counts against a uniform expectation.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		d := float64(c) - want
		x += d * d / want
	}
	return x
}

// chi2Limit999 is the 0.999 quantile of χ² with 63 degrees of freedom (64
// residues): a uniform spread stays under it but once in a thousand runs.
const chi2Limit999 = 103.4

// Without a gene, IDs spread evenly modulo every m dividing 2^K, at one
// request per second (where the sequence would restart at 0 every tick)
// and at full rate. Leaf's remedy, a random first sequence of 0..99 in
// each tick, fails the same test modulo 64 at the low rate.
func TestGeneBitsEvenSpread(t *testing.T) {
	const k, samples = 6, 64 * 200
	for _, rate := range []string{"one per second", "full rate"} {
		clk := newFake(t)
		g := newGen(t, snowflake.Config{Layout: geneLayout(k), WorkerID: 3, Clock: clk})
		var ids []int64
		for len(ids) < samples {
			if rate == "one per second" {
				clk.Advance(time.Second)
				id, err := g.Next()
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
				continue
			}
			batch, err := g.AppendN(nil, 64) // a whole tick: 2^(12-6)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, batch...)
			clk.Advance(time.Millisecond)
		}
		for _, m := range []int64{2, 4, 8, 16, 32, 64} {
			counts := make([]int, m)
			for _, id := range ids[:samples] {
				counts[id%m]++
			}
			// m-1 degrees of freedom; 103.4 bounds them all (63 at most).
			x := chiSquare(counts)
			if x > chi2Limit999 {
				t.Errorf("%s: id mod %d: χ² = %.1f over %d IDs, counts %v", rate, m, x, samples, counts)
			}
			if m == 64 {
				t.Logf("gene bits, %s, mod 64: χ² = %.1f over %d IDs (limit %.1f)", rate, x, samples, chi2Limit999)
			}
		}
	}

	// Leaf: sequence starts at rand(0..99) in each new tick; one ID per tick.
	rng := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, 64)
	for range samples {
		counts[rng.IntN(100)%64]++
	}
	if x := chiSquare(counts); x < 10*chi2Limit999 {
		t.Errorf("Leaf's random start mod 64: χ² = %.1f, expected far beyond %.1f (residues 0-35 twice as likely)", x, chi2Limit999)
	} else {
		t.Logf("Leaf's random start, one ID per tick, mod 64: χ² = %.0f (limit %.1f); residues 0-35 / 36-63 average %.0f / %.0f",
			x, chi2Limit999, avg(counts[:36]), avg(counts[36:]))
	}
}

func avg(c []int) float64 {
	s := 0
	for _, v := range c {
		s += v
	}
	return float64(s) / float64(len(c))
}

// Gene bits are part of the layout: its string, JSON and equality.
func TestGeneBitsLayout(t *testing.T) {
	l := geneLayout(4)
	if l.String() != "41/10/12 gene 4" {
		t.Errorf("String %q", l.String())
	}
	b, err := l.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back snowflake.Layout
	if err := back.UnmarshalJSON(b); err != nil || !back.Equal(l) || back.Equal(snowflake.DefaultLayout()) {
		t.Errorf("round trip of %s: %s → %+v, %v", l, b, back, err)
	}
	def, _ := snowflake.DefaultLayout().MarshalJSON()
	if strings.Contains(string(def), "gene") {
		t.Errorf("a layout without gene bits writes them: %s", def)
	}
	for _, k := range []uint{11, 13} {
		bad := geneLayout(k)
		if _, err := snowflake.NewGenerator(snowflake.Config{Layout: bad, Clock: newFake(t)}); err == nil {
			t.Errorf("%d gene bits accepted", k)
		}
	}
	js := snowflake.JS53Layout()
	js.GeneBits = 8
	if _, err := snowflake.NewGenerator(snowflake.Config{Layout: js, Clock: newFake(t)}); err == nil {
		t.Error("8 gene bits accepted in 7 sequence bits")
	}
}
