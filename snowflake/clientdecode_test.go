package snowflake_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The client's decoder (client.Layout, standard library only) splits every
// ID as the node's does (snowflake.Layout, behind GET /decode/{id}), over
// random layouts and IDs, and refuses what the node refuses.
func TestClientDecodeMatchesNode(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 45))
	for i := 0; i < 20000; i++ {
		tb := uint(20 + r.IntN(30))
		sb := uint(1 + r.IntN(int(63-tb)))
		wb := uint(r.IntN(int(63-tb-sb) + 1))
		gb := uint(r.IntN(int(min(sb, snowflake.MaxGeneBits)) + 1))
		unit := time.Duration(1+r.IntN(3)*r.IntN(1000)) * time.Millisecond
		epoch := snowflake.DefaultEpoch.Add(time.Duration(r.Int64N(int64(40*365*24*time.Hour))) - 20*365*24*time.Hour).Truncate(time.Millisecond)
		node := snowflake.Layout{TimeBits: tb, WorkerBits: wb, SequenceBits: sb, GeneBits: gb, Epoch: epoch, Unit: unit}
		cl := client.Layout{TimeBits: tb, WorkerBits: wb, SequenceBits: sb, GeneBits: gb, Epoch: epoch, Unit: unit}
		id := int64(r.Uint64N(uint64(node.MaxID())+1)) + int64(r.IntN(3)-1) // now and then -1 or one above the largest
		want, werr := node.Decode(id)
		got, gerr := cl.Decode(id)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("layout %+v id %d: node error %v, client error %v", node, id, werr, gerr)
		}
		if werr != nil {
			continue
		}
		var gene int64
		if want.Gene != nil {
			gene = *want.Gene
		}
		if got.UnixMilli != want.UnixMilli() || got.WorkerID != want.WorkerID || got.Sequence != want.Sequence || got.Gene != gene {
			t.Fatalf("layout %+v id %d: client %+v, node %+v (gene %d)", node, id, got, want, gene)
		}
	}
}

// A layout no node accepts is refused by the client's decoder too.
func TestClientDecodeRefusesBadLayouts(t *testing.T) {
	good := client.DefaultLayout()
	for name, mutate := range map[string]func(*client.Layout){
		"64 bits":      func(l *client.Layout) { l.TimeBits = 42 },
		"no sequence":  func(l *client.Layout) { l.SequenceBits = 0; l.TimeBits = 53 },
		"11 gene bits": func(l *client.Layout) { l.GeneBits = 11 },
		"unit 0":       func(l *client.Layout) { l.Unit = 0 },
		"unit 1.5ms":   func(l *client.Layout) { l.Unit = 1500 * time.Microsecond },
	} {
		l := good
		mutate(&l)
		if _, err := l.Decode(1); err == nil {
			t.Errorf("%s: Decode accepted layout %+v", name, l)
		}
	}
	if _, err := good.Decode(1 << 40); err != nil {
		t.Fatalf("default layout: %v", err)
	}
}
