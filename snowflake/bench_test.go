package snowflake_test

// Benchmarks of the generator against two widely used Go snowflake
// libraries. They measure; they assert nothing about speed.
//
// Run: go test -run '^$' -bench . -benchtime 2s -count 3 ./snowflake/
// docs/performance.md is written from them by scripts/perfpage.sh.

import (
	"sync"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake/v2"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// reportIDs reports the rate of IDs issued: ids per op times ops per second.
func reportIDs(b *testing.B, idsPerOp int) {
	b.Helper()
	b.ReportMetric(float64(b.N)*float64(idsPerOp)/b.Elapsed().Seconds(), "ids/s")
}

// runParallelIDs times next, one ID a call, on b.RunParallel's goroutines
// (from a reset timer) and reports ids/s. An error from next fails the
// benchmark.
func runParallelIDs(b *testing.B, next func() (int64, error)) {
	b.Helper()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportIDs(b, 1)
}

// benchLayout returns DefaultLayout with the bit split bits.
func benchLayout(b *testing.B, bits string) snowflake.Layout {
	b.Helper()
	l, err := snowflake.ParseLayout(bits, snowflake.DefaultEpoch.Format(time.RFC3339), "1ms", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// benchGenerator returns a generator on the machine's clock.
func benchGenerator(b *testing.B, bits string) *snowflake.Generator {
	b.Helper()
	g, err := snowflake.NewGenerator(snowflake.Config{Layout: benchLayout(b, bits), WorkerID: 0, Clock: clock.NewSystem()})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkOurs_Next_41_10_12 is the production layout: capped at 4096 IDs
// per millisecond (4,096,000 IDs/s).
func BenchmarkOurs_Next_41_10_12(b *testing.B) {
	g := benchGenerator(b, "41/10/12")
	runParallelIDs(b, g.Next)
}

// BenchmarkOurs_Next_41_0_22 has 4M IDs per millisecond: the sequence never
// runs out, so it measures the raw cost of one ID.
func BenchmarkOurs_Next_41_0_22(b *testing.B) {
	g := benchGenerator(b, "41/0/22")
	runParallelIDs(b, g.Next)
}

// monoClock reads time the way bwmarrin/snowflake does: the wall time at
// start plus the monotonic time elapsed, one vDSO read instead of the two of
// time.Now. It cannot see the wall clock step, so it is only for telling the
// generator's own cost from the clock's; never use it to issue IDs.
type monoClock struct {
	wall0 int64
	start time.Time
}

func newMonoClock() monoClock { t := time.Now(); return monoClock{wall0: t.UnixNano(), start: t} }

// WallNanos is the start's wall time plus the monotonic time since.
func (c monoClock) WallNanos() int64 { return c.wall0 + int64(time.Since(c.start)) }

// Mono is the monotonic time since the start.
func (c monoClock) Mono() time.Duration { return time.Since(c.start) }

// BenchmarkOurs_Next_41_0_22_MonoClock is BenchmarkOurs_Next_41_0_22 with
// the clock read bwmarrin uses: the generator's cost with the same clock.
func BenchmarkOurs_Next_41_0_22_MonoClock(b *testing.B) {
	g, err := snowflake.NewGenerator(snowflake.Config{Layout: benchLayout(b, "41/0/22"), Clock: newMonoClock()})
	if err != nil {
		b.Fatal(err)
	}
	runParallelIDs(b, g.Next)
}

// idSink keeps the loop benchmarks' IDs alive.
var idSink int64

// BenchmarkOurs_Loop_41_0_22 calls Next in a plain loop on one goroutine:
// the cost of one ID without b.RunParallel's harness.
func BenchmarkOurs_Loop_41_0_22(b *testing.B) {
	g := benchGenerator(b, "41/0/22")
	for b.Loop() {
		id, err := g.Next()
		if err != nil {
			b.Fatal(err)
		}
		idSink = id
	}
	reportIDs(b, 1)
}

// BenchmarkOurs_AppendN1000_41_10_12 takes 1000 IDs per call (one op).
func BenchmarkOurs_AppendN1000_41_10_12(b *testing.B) {
	const n = 1000
	g := benchGenerator(b, "41/10/12")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]int64, 0, n)
		for pb.Next() {
			var err error
			if buf, err = g.AppendN(buf[:0], n); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportIDs(b, n)
}

// bwMu serializes the benchmarks that change bwmarrin/snowflake's package
// globals NodeBits and StepBits.
var bwMu sync.Mutex

// bwNode returns a bwmarrin node with nodeBits/stepBits; the package globals
// are restored when the benchmark ends.
func bwNode(b *testing.B, nodeBits, stepBits uint8) *bwsnowflake.Node {
	b.Helper()
	bwMu.Lock()
	oldNode, oldStep := bwsnowflake.NodeBits, bwsnowflake.StepBits
	bwsnowflake.NodeBits, bwsnowflake.StepBits = nodeBits, stepBits
	b.Cleanup(func() {
		bwsnowflake.NodeBits, bwsnowflake.StepBits = oldNode, oldStep
		bwMu.Unlock()
	})
	n, err := bwsnowflake.NewNode(0)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkBwmarrin_Generate_41_10_12 is bwmarrin/snowflake's default layout
// (41 bits of ms, 10 node, 12 step): the same 4,096,000 IDs/s ceiling.
func BenchmarkBwmarrin_Generate_41_10_12(b *testing.B) {
	n := bwNode(b, 10, 12)
	runParallelIDs(b, func() (int64, error) { return n.Generate().Int64(), nil })
}

// BenchmarkBwmarrin_Generate_41_0_22 is bwmarrin/snowflake with NodeBits 0
// and StepBits 22: uncapped like BenchmarkOurs_Next_41_0_22.
func BenchmarkBwmarrin_Generate_41_0_22(b *testing.B) {
	n := bwNode(b, 0, 22)
	runParallelIDs(b, func() (int64, error) { return n.Generate().Int64(), nil })
}

// BenchmarkBwmarrin_Loop_41_0_22 is BenchmarkOurs_Loop_41_0_22 for
// bwmarrin/snowflake: Generate in a plain loop on one goroutine.
func BenchmarkBwmarrin_Loop_41_0_22(b *testing.B) {
	n := bwNode(b, 0, 22)
	for b.Loop() {
		idSink = n.Generate().Int64()
	}
	reportIDs(b, 1)
}

// sonyflakeGen returns a sonyflake v2 generator with the given time unit.
// v2.0.0 fixes the bits at 39 time / 8 sequence / 16 machine; only the
// unit is configurable.
func sonyflakeGen(b *testing.B, unit time.Duration) *sonyflake.Sonyflake {
	b.Helper()
	sf, err := sonyflake.New(sonyflake.Settings{
		TimeUnit:  unit,
		StartTime: snowflake.DefaultEpoch,
		MachineID: func() (int, error) { return 1, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	return sf
}

// BenchmarkSonyflakeV2_NextID_39_16_8_1ms is the closest sonyflake v2.0.0 gets
// to 41/10/12: its bits are fixed, so 1ms ticks with 8 sequence bits (256
// IDs/ms, a 256,000 IDs/s ceiling).
func BenchmarkSonyflakeV2_NextID_39_16_8_1ms(b *testing.B) {
	runParallelIDs(b, sonyflakeGen(b, time.Millisecond).NextID)
}

// BenchmarkSonyflakeV2_NextID_39_16_8_10ms is sonyflake's default: 10ms
// ticks, 256 IDs per tick (25,600 IDs/s).
func BenchmarkSonyflakeV2_NextID_39_16_8_10ms(b *testing.B) {
	runParallelIDs(b, sonyflakeGen(b, 0).NextID)
}
