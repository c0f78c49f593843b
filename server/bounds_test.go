package server

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// boundsLayouts are layouts of other units, splits, gene bits and epochs
// than the default, for the property tests.
func boundsLayouts() []snowflake.Layout {
	leafEpoch := time.UnixMilli(1288834974657).UTC() // Twitter's, Leaf's default
	odd := time.Date(2020, 5, 5, 5, 5, 5, 5e6, time.UTC)
	unix := time.Unix(0, 0).UTC()
	mk := func(tb, wb, sb, gb uint, unit time.Duration, epoch time.Time) snowflake.Layout {
		return snowflake.Layout{TimeBits: tb, WorkerBits: wb, SequenceBits: sb, GeneBits: gb, Unit: unit, Epoch: epoch}
	}
	return []snowflake.Layout{
		snowflake.DefaultLayout(),
		snowflake.JS53Layout(),
		mk(41, 10, 12, 4, time.Millisecond, snowflake.DefaultEpoch),
		mk(39, 10, 14, 0, 10*time.Millisecond, leafEpoch),
		mk(32, 8, 12, 2, time.Second, odd),
		mk(31, 5, 17, 0, time.Hour, unix),
		mk(20, 3, 1, 1, 7*time.Millisecond, odd),
		mk(45, 4, 14, 0, 3*time.Millisecond, unix),
	}
}

// boundText writes Unix millisecond ms + extra nanoseconds (0 ≤ extra <
// 1ms) as /bounds reads it: Unix ms (extra dropped), RFC 3339 in UTC, or
// with an offset and a fraction; far-future times (RFC 3339 holds 4-digit
// years) as Unix ms.
func boundText(r *rand.Rand, ms int64, extra int) string {
	t := time.UnixMilli(ms).Add(time.Duration(extra))
	if t.Year() > 9999 || r.IntN(4) == 0 {
		return strconv.FormatInt(ms, 10)
	}
	switch r.IntN(3) {
	case 0:
		return t.UTC().Format(time.RFC3339Nano)
	case 1:
		return t.In(time.FixedZone("", (5*60+30)*60)).Format(time.RFC3339Nano)
	}
	return t.In(time.FixedZone("", -8*3600)).Format("2006-01-02T15:04:05.000-07:00")
}

// TestBoundsProperty: for random layouts and random ranges, an ID made
// with the layout's own Compose is within [min_id, max_id] exactly when
// its tick is within [fromTick, toTick), for ticks at the edges and
// within, workers and sequences at theirs; likewise its UUIDv7 within
// [min_uuid, max_uuid]. The range is given in any of /bounds' forms, its
// ends anywhere in their ticks.
func TestBoundsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 3))
	for _, l := range boundsLayouts() {
		t.Run(l.Describe(), func(t *testing.T) {
			codec, uuidErr := uuidv7.NewCodec(l)
			ticks := int64(1) << l.TimeBits
			unit := l.Unit.Milliseconds()
			epoch := l.Epoch.UnixMilli()
			for range 300 {
				fromTick, toTick := pickTicks(r, ticks)
				// Anywhere in the tick; to's tick ticks is the end itself.
				fromMS := epoch + fromTick*unit + r.Int64N(unit)
				toMS := epoch + toTick*unit
				if toTick < ticks {
					toMS += r.Int64N(unit)
				}
				from := boundText(r, fromMS, r.IntN(int(time.Millisecond)))
				to := boundText(r, toMS, 0)
				b, err := boundsOf(l, from, to, uuidErr == nil)
				if err != nil {
					t.Fatalf("bounds(%s, %s), ticks [%d, %d): %v", from, to, fromTick, toTick, err)
				}
				if b.FromMS != epoch+fromTick*unit || b.ToMS != epoch+toTick*unit {
					t.Fatalf("bounds(%s, %s): effective [%d, %d), want [%d, %d)", from, to, b.FromMS, b.ToMS, epoch+fromTick*unit, epoch+toTick*unit)
				}
				if ft, err := time.Parse(time.RFC3339, b.From); err == nil && ft.UnixMilli() != b.FromMS {
					t.Fatalf("from %q is not from_ms %d", b.From, b.FromMS)
				}
				minID, err1 := strconv.ParseInt(b.MinID, 10, 64)
				maxID, err2 := strconv.ParseInt(b.MaxID, 10, 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("bounds(%s, %s): ids %q %q", from, to, b.MinID, b.MaxID)
				}
				for _, tk := range []int64{fromTick - 1, fromTick, fromTick + 1, toTick - 2, toTick - 1, toTick, r.Int64N(ticks), (fromTick + toTick) / 2} {
					if tk < 0 || tk >= ticks {
						continue
					}
					for _, ws := range [][2]int64{{0, 0}, {l.MaxWorkerID(), l.MaxSequence()}, {r.Int64N(l.MaxWorkerID() + 1), r.Int64N(l.MaxSequence() + 1)}} {
						id := l.Compose(tk, ws[0], ws[1])
						in := tk >= fromTick && tk < toTick
						if got := id >= minID && id <= maxID; got != in {
							t.Fatalf("%s: id %d (tick %d) within [%d, %d] = %v, its tick in [%d, %d) = %v", l.Describe(), id, tk, minID, maxID, got, fromTick, toTick, in)
						}
						if uuidErr != nil || b.MinUUID == "" {
							continue
						}
						u := codec.Encode(id, r.Uint64()).String()
						if got := u >= b.MinUUID && u <= b.MaxUUID; got != in {
							t.Fatalf("%s: uuid %s of id %d (tick %d) within [%s, %s] = %v, want %v", l.Describe(), u, id, tk, b.MinUUID, b.MaxUUID, got, in)
						}
					}
				}
			}
		})
	}
}

// pickTicks picks a range of ticks [from, to) of the ticks a layout has,
// often at either end: from 0 and to ticks a tenth of the time each.
func pickTicks(r *rand.Rand, ticks int64) (from, to int64) {
	pickTick := func() int64 {
		switch r.IntN(4) {
		case 0:
			return r.Int64N(min(ticks, 1000))
		case 1:
			return ticks - 1 - r.Int64N(min(ticks, 1000))
		}
		return r.Int64N(ticks)
	}
	fromTick, toTick := pickTick(), pickTick()+1
	if fromTick >= toTick {
		fromTick, toTick = toTick-1, fromTick+1
	}
	if r.IntN(10) == 0 {
		fromTick = 0
	}
	if r.IntN(10) == 0 {
		toTick = ticks
	}
	if toTick == fromTick {
		toTick++
	}
	return fromTick, toTick
}

// TestBoundsEdges: the epoch, the end of the time field, one tick, and
// the exact answer of the default layout.
func TestBoundsEdges(t *testing.T) {
	def := snowflake.DefaultLayout()
	epoch := def.Epoch.UnixMilli()
	end := def.End().UnixMilli()
	sec := snowflake.Layout{TimeBits: 32, WorkerBits: 8, SequenceBits: 12, Unit: time.Second, Epoch: def.Epoch}
	tests := []struct {
		name     string
		l        snowflake.Layout
		from, to string
		want     wire.BoundsBody
	}{
		{"first second of 2026", def, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", wire.BoundsBody{
			From: "2026-01-01T00:00:00.000Z", To: "2026-01-01T00:00:01.000Z", FromMS: 1767225600000, ToMS: 1767225601000,
			MinID: strconv.FormatInt((1767225600000-epoch)<<22, 10), MaxID: strconv.FormatInt((1767225601000-epoch)<<22-1, 10),
			MinUUID: "019b76da-a800-7000-8000-000000000000", MaxUUID: "019b76da-abe7-7fff-bfff-ffffffffffff",
		}},
		{"the epoch, one ms", def, strconv.FormatInt(epoch, 10), strconv.FormatInt(epoch+1, 10), wire.BoundsBody{
			From: "2024-01-01T00:00:00.000Z", To: "2024-01-01T00:00:00.001Z", FromMS: epoch, ToMS: epoch + 1,
			MinID: "0", MaxID: strconv.FormatInt(1<<22-1, 10),
			MinUUID: "018cc251-f400-7000-8000-000000000000", MaxUUID: "018cc251-f400-7fff-bfff-ffffffffffff",
		}},
		{"up to the end", def, strconv.FormatInt(end-1, 10), strconv.FormatInt(end, 10), wire.BoundsBody{
			From: time.UnixMilli(end - 1).UTC().Format(boundsTimeFormat), To: time.UnixMilli(end).UTC().Format(boundsTimeFormat), FromMS: end - 1, ToMS: end,
			MinID: strconv.FormatInt((1<<41-1)<<22, 10), MaxID: "9223372036854775807",
			MinUUID: wire.FormatUUID(uuidBound(snowflake.UnixMilli(end-1), false)), MaxUUID: wire.FormatUUID(uuidBound(snowflake.UnixMilli(end-1), true)),
		}},
		{"offset and fraction, 1s ticks", sec, "2026-01-01T02:00:00.750+02:00", "2026-01-01T00:00:02.5Z", wire.BoundsBody{
			From: "2026-01-01T00:00:00.000Z", To: "2026-01-01T00:00:02.000Z", FromMS: 1767225600000, ToMS: 1767225602000,
			MinID: strconv.FormatInt((1767225600000-epoch)/1000<<20, 10), MaxID: strconv.FormatInt((1767225602000-epoch)/1000<<20-1, 10),
			MinUUID: wire.FormatUUID(uuidBound(1767225600000, false)), MaxUUID: wire.FormatUUID(uuidBound(1767225601000, true)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := boundsOf(tt.l, tt.from, tt.to, true)
			if err != nil || got != tt.want {
				t.Fatalf("bounds(%s, %s) = %+v, %v\nwant %+v", tt.from, tt.to, got, err, tt.want)
			}
		})
	}
	// The UUID bounds are the smallest and largest version 7 UUIDs of
	// their millisecond.
	lo, hi := uuidBound(1767225600000, false), uuidBound(1767225600000, true)
	if lo[6]>>4 != 7 || hi[6]>>4 != 7 || lo[8]>>6 != 2 || hi[8]>>6 != 2 {
		t.Fatalf("uuid bounds %x %x: not version 7 with the RFC variant", lo, hi)
	}
	if (uuidv7.UUID(hi)).String() != "019b76da-a800-7fff-bfff-ffffffffffff" {
		t.Fatalf("largest uuid of the ms: %s", uuidv7.UUID(hi))
	}
}

// TestBoundsErrors: every bad request is 400 invalid_range (or
// invalid_parameter) naming the problem.
func TestBoundsErrors(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	end := snowflake.DefaultLayout().End().UnixMilli()
	tests := []struct {
		name, query string
		code        string
		msgHas      []string
	}{
		{"no query", "", "invalid_range", []string{"from is required"}},
		{"no to", "?from=2026-01-01T00:00:00Z", "invalid_range", []string{"to is required"}},
		{"no from", "?to=2026-01-01T00:00:00Z", "invalid_range", []string{"from is required"}},
		{"empty from", "?from=&to=1", "invalid_range", []string{"from is empty"}},
		{"malformed from", "?from=yesterday&to=2026-01-01T00:00:00Z", "invalid_range", []string{`from "yesterday"`, "RFC 3339"}},
		{"date only", "?from=2026-01-01&to=2026-01-02", "invalid_range", []string{`from "2026-01-01"`}},
		{"no offset", "?from=2026-01-01T00:00:00&to=2026-01-02T00:00:00Z", "invalid_range", []string{"RFC 3339"}},
		{"seconds not ms", "?from=1.5&to=2", "invalid_range", []string{`"1.5"`}},
		{"ms overflow", "?from=1&to=99999999999999999999", "invalid_range", []string{"out of range"}},
		{"before the epoch", "?from=2023-12-31T23:59:59.999Z&to=2026-01-01T00:00:00Z", "invalid_range", []string{"before the layout's epoch 2024-01-01T00:00:00.000Z"}},
		{"negative ms", "?from=-1&to=1", "invalid_range", []string{"before the layout's epoch"}},
		{"after the end", "?from=2026-01-01T00:00:00Z&to=" + strconv.FormatInt(end+1, 10), "invalid_range", []string{"after the end of the layout's time field", "41 bits of 1ms"}},
		{"same time", "?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "invalid_range", []string{"empty", "same time"}},
		{"same time, two forms", "?from=1767225600000&to=2026-01-01T01:00:00%2B01:00", "invalid_range", []string{"empty", "same time"}},
		{"reversed", "?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "invalid_range", []string{"reversed"}},
		{"unknown parameter", "?from=1&to=2&format=json", "invalid_parameter", []string{`"format"`, "from and to"}},
		{"repeated", "?from=1767225600000&to=1767225600001&to=1767225600002", "invalid_parameter", []string{`"to"`, "more than once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "GET", "/bounds"+tt.query)
			e := decodeError(t, r)
			if r.status != 400 || e.Code != tt.code {
				t.Fatalf("GET /bounds%s: %d %s, want 400 %s", tt.query, r.status, r.body, tt.code)
			}
			for _, s := range tt.msgHas {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q lacks %q", e.Message, s)
				}
			}
		})
	}
	// Within one tick of 1 s: empty, saying so.
	sec := snowflake.Layout{TimeBits: 32, WorkerBits: 8, SequenceBits: 12, Unit: time.Second, Epoch: snowflake.DefaultEpoch}
	if _, err := boundsOf(sec, "2026-01-01T00:00:00.100Z", "2026-01-01T00:00:00.900Z", true); err == nil ||
		!strings.Contains(err.Error(), "same tick, which starts at 2026-01-01T00:00:00.000Z (ticks of 1s") {
		t.Errorf("one tick of 1s: %v", err)
	}
}

// TestBoundsServed: /bounds answers JSON while the node is out of
// service, and leaves the UUIDs out where the layout makes none.
func TestBoundsServed(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	f.check.Fail("test: clock suspect")
	r := f.do(t, "GET", "/bounds?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:01Z")
	var b wire.BoundsBody
	if err := json.Unmarshal(r.body, &b); r.status != 200 || r.contentType != "application/json" || err != nil || b.MinUUID == "" {
		t.Fatalf("out of service: %d %s %s", r.status, r.contentType, r.body)
	}
	if r.cacheControl != "no-store" {
		t.Errorf("Cache-Control %q", r.cacheControl)
	}
	wide := snowflake.Layout{TimeBits: 20, WorkerBits: 20, SequenceBits: 23, Unit: time.Hour, Epoch: snowflake.DefaultEpoch}
	g := newFixture(t, wide, nil).serve(t)
	r = g.do(t, "GET", "/bounds?from=2026-01-01T00:00:00Z&to=2026-01-01T01:00:00Z")
	if r.status != 200 || strings.Contains(string(r.body), "uuid") {
		t.Fatalf("layout without UUIDs: %d %s", r.status, r.body)
	}
}

// issued is an ID and the wall-clock interval its request was made in.
type issued struct {
	id         int64
	before, at int64 // Unix ms read before the request and after its answer
}

// TestBoundsLiveGenerator: IDs a real generator issues over a second are
// bounded by /bounds of any range of tick starts within that second:
// every ID whose request ran wholly inside [from, to) is within
// [min_id, max_id], every one answered before from is below min_id, every
// one asked for at to or later is above max_id. The range is picked after
// the IDs, from the times seen, so how fast the machine is does not matter.
func TestBoundsLiveGenerator(t *testing.T) {
	for _, l := range []snowflake.Layout{
		snowflake.DefaultLayout(),
		{TimeBits: 39, WorkerBits: 10, SequenceBits: 14, Unit: 10 * time.Millisecond, Epoch: time.UnixMilli(1288834974657).UTC()},
	} {
		t.Run(l.Describe(), func(t *testing.T) {
			f := newFixture(t, l, nil).serve(t)
			var got []issued
			start := time.Now()
			for time.Since(start) < 600*time.Millisecond {
				before := time.Now().UnixMilli()
				r := f.do(t, "GET", "/id")
				at := time.Now().UnixMilli()
				if r.status != 200 {
					t.Fatalf("/id: %d %s", r.status, r.body)
				}
				id, err := strconv.ParseInt(string(r.body), 10, 64)
				if err != nil {
					t.Fatalf("/id: %q: %v", r.body, err)
				}
				got = append(got, issued{id: id, before: before, at: at})
				time.Sleep(time.Millisecond)
			}
			unit, epoch := l.Unit.Milliseconds(), l.Epoch.UnixMilli()
			tickStart := func(ms int64) int64 { return epoch + (ms-epoch+unit-1)/unit*unit } // the first tick start at or after ms
			first, last := got[0].before, got[len(got)-1].at
			for k := range 20 {
				from := tickStart(first + (last-first)*int64(k)/40)
				to := tickStart(from + 1 + (last-from)*int64(k%7+1)/8)
				if to <= from {
					to = from + unit
				}
				r := f.do(t, "GET", "/bounds?from="+strconv.FormatInt(from, 10)+"&to="+time.UnixMilli(to).UTC().Format(time.RFC3339Nano))
				var b wire.BoundsBody
				if err := json.Unmarshal(r.body, &b); r.status != 200 || err != nil {
					t.Fatalf("/bounds: %d %s", r.status, r.body)
				}
				minID, _ := strconv.ParseInt(b.MinID, 10, 64)
				maxID, _ := strconv.ParseInt(b.MaxID, 10, 64)
				if b.FromMS != from || b.ToMS != to {
					t.Fatalf("effective [%d, %d), asked for tick starts [%d, %d)", b.FromMS, b.ToMS, from, to)
				}
				var in, below, above int
				for _, x := range got {
					switch {
					case x.at < from:
						below++
						if x.id >= minID {
							t.Errorf("id %d answered at %d, before from %d, is not below min_id %d", x.id, x.at, from, minID)
						}
					case x.before >= from && x.at < to:
						in++
						if x.id < minID || x.id > maxID {
							t.Errorf("id %d issued in [%d, %d] within [%d, %d) is outside [%d, %d]", x.id, x.before, x.at, from, to, minID, maxID)
						}
					case x.before >= to:
						above++
						if x.id <= maxID {
							t.Errorf("id %d asked for at %d, after to %d, is not above max_id %d", x.id, x.before, to, maxID)
						}
					}
				}
				t.Logf("[%d, %d): %d IDs before, %d inside, %d after", from, to, below, in, above)
			}
		})
	}
}
