package uuidv7_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	guuid "github.com/google/uuid"

	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

func layouts(t *testing.T) []snowflake.Layout {
	t.Helper()
	gene := snowflake.DefaultLayout()
	gene.GeneBits = 6
	wide, err := snowflake.ParseLayout("21/21/21", "2024-01-01T00:00:00Z", "1h", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := snowflake.ParseLayout("39/8/16", "2024-01-01T00:00:00Z", "10ms", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := snowflake.ParseLayout("50/3/5", "2024-01-01T00:00:00Z", "1ms", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return []snowflake.Layout{snowflake.DefaultLayout(), snowflake.JS53Layout(), gene, wide, coarse, tiny}
}

// Every UUID parses as version 7 with the RFC variant in an independent
// library, carries the ID's time, and decodes back to the ID; the random
// bits differ between encodings of one ID but never the decoded ID.
func TestEncodeDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, l := range layouts(t) {
		c, err := uuidv7.NewCodec(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if c.RandomBits() < uuidv7.MinRandomBits {
			t.Errorf("%s: %d random bits", l, c.RandomBits())
		}
		now := l.TickOf(time.Now().UnixNano())
		for range 2000 {
			tick := now - rng.Int64N(1000)
			id := l.Compose(tick, rng.Int64N(l.MaxWorkerID()+1), rng.Int64N(l.MaxSequence()+1))
			u := c.Encode(id, rng.Uint64())
			g, err := guuid.Parse(u.String())
			if err != nil || g.Version() != 7 || g.Variant() != guuid.RFC4122 {
				t.Fatalf("%s: %s: google/uuid says %v version %d variant %v", l, u, err, g.Version(), g.Variant())
			}
			sec, nsec := g.Time().UnixTime()
			p, _ := l.Decode(id)
			if got := sec*1000 + nsec/1e6; got != p.Time.UnixMilli() {
				t.Fatalf("%s: %s: time %d ms, the ID's %d", l, u, got, p.Time.UnixMilli())
			}
			back, err := uuidv7.Parse(u.String())
			if err != nil || back != u {
				t.Fatalf("%s: Parse(%s) = %s, %v", l, u, back, err)
			}
			if d, err := c.Decode(u); err != nil || d != id {
				t.Fatalf("%s: Decode(%s) = %d, %v; want %d", l, u, d, err, id)
			}
			if u2 := c.Encode(id, ^rng.Uint64()); u2 == u && c.RandomBits() > 0 {
				t.Fatalf("%s: two encodings of %d are equal: no random bits", l, id)
			}
		}
	}
}

// Increasing IDs of one worker give increasing UUIDs, as bytes and as
// canonical strings, whatever the random bits.
func TestOrderFollowsIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range layouts(t) {
		c, _ := uuidv7.NewCodec(l)
		worker := l.MaxWorkerID() / 2
		tick := l.TickOf(time.Now().UnixNano()) - 500
		var prev uuidv7.UUID
		var prevS string
		for i := range 3000 {
			seq := int64(i) % (l.MaxSequence() + 1)
			if seq == 0 {
				tick += 1 + rng.Int64N(3)
			}
			u := c.Encode(l.Compose(tick, worker, seq), rng.Uint64())
			if s := u.String(); i > 0 && (bytes.Compare(u[:], prev[:]) <= 0 || s <= prevS) {
				t.Fatalf("%s: %s after %s", l, s, prevS)
			}
			prev, prevS = u, u.String()
		}
	}
}

// What is not a UUID of the layout is refused with a reason.
func TestDecodeRefuses(t *testing.T) {
	c, _ := uuidv7.NewCodec(snowflake.DefaultLayout())
	v4 := guuid.New() // random, version 4
	for _, s := range []string{
		"", "not-a-uuid", "0190b2d4-7c3e-7abc-8def-0123456789a", "0190b2d4x7c3e-7abc-8def-0123456789ab", "0190b2d4-7c3e-7abc-8def-0123456789ag",
	} {
		if _, err := uuidv7.Parse(s); !errors.Is(err, uuidv7.ErrInvalid) {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	u, _ := uuidv7.Parse(v4.String())
	if _, err := c.Decode(u); !errors.Is(err, uuidv7.ErrInvalid) {
		t.Errorf("a version 4 UUID decoded: %v", err)
	}
	good := c.Encode(snowflake.DefaultLayout().Compose(1000, 3, 4), 0)
	bad := good
	bad[8] &^= 0x80 // variant 0b00
	if _, err := c.Decode(bad); !errors.Is(err, uuidv7.ErrInvalid) {
		t.Errorf("a UUID without the RFC variant decoded: %v", err)
	}
	early := good
	early[0], early[1], early[2], early[3], early[4], early[5] = 0, 0, 0, 0, 0, 1 // 1 ms after 1970: before the epoch
	if _, err := c.Decode(early); !errors.Is(err, uuidv7.ErrInvalid) {
		t.Errorf("a time before the epoch decoded: %v", err)
	}
	tooWide, _ := snowflake.ParseLayout("20/22/21", "2024-01-01T00:00:00Z", "1h", time.Now())
	if _, err := uuidv7.NewCodec(tooWide); !errors.Is(err, uuidv7.ErrLayout) {
		t.Errorf("43 worker and sequence bits: %v", err)
	}
}

// Decode checks a UUID's form, not where it was made (its doc comment and
// docs/api.md say so): a version 7 UUID of another generator decodes, its
// random bits read as a worker and sequence, with 1 ms ticks whatever its
// millisecond; a coarser tick refuses only times that are not a tick's
// start.
func TestDecodeTakesForeignUUIDs(t *testing.T) {
	coarse, err := snowflake.ParseLayout("39/8/16", "2024-01-01T00:00:00Z", "10ms", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		layout snowflake.Layout
		uuid   string
		worker int64 // -1: refused
		seq    int64
	}{
		{"docs/api.md's example", snowflake.DefaultLayout(), "019abc12-3456-7def-8123-456789abcdef", 891, 3090},
		{"rand_a all ones", snowflake.DefaultLayout(), "019abc12-3457-7fff-bfff-ffffffffffff", 1023, 4095},
		{"10 ms ticks, a tick's start", coarse, "019abc12-3452-7def-8123-456789abcdef", 222, 61512},
		{"10 ms ticks, 1 ms after one", coarse, "019abc12-3453-7def-8123-456789abcdef", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := uuidv7.NewCodec(tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			u, err := uuidv7.Parse(tc.uuid)
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.Decode(u)
			if tc.worker < 0 {
				if !errors.Is(err, uuidv7.ErrInvalid) {
					t.Fatalf("Decode(%s) = %d, %v; want ErrInvalid", u, id, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", u, err)
			}
			p, err := tc.layout.Decode(id)
			if err != nil || p.WorkerID != tc.worker || p.Sequence != tc.seq {
				t.Fatalf("Decode(%s) = %d: %+v, %v; want worker %d sequence %d", u, id, p, err, tc.worker, tc.seq)
			}
		})
	}
	// Any version 7 UUID of an independent generator decodes with 1 ms ticks.
	c, _ := uuidv7.NewCodec(snowflake.DefaultLayout())
	for range 1000 {
		g, err := guuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		u, _ := uuidv7.Parse(g.String())
		if _, err := c.Decode(u); err != nil {
			t.Fatalf("google/uuid's %s: %v", g, err)
		}
	}
}
