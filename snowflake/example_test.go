package snowflake_test

import (
	"fmt"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func ExampleGenerator_Next() {
	// A fake clock, frozen at a fixed time, makes the output repeatable; a
	// nil Clock is the system clock.
	clk := clocktest.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	g, err := snowflake.NewGenerator(snowflake.Config{
		Layout:   snowflake.DefaultLayout(),
		WorkerID: 7,
		Clock:    clk,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		id, err := g.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		p, _ := g.Layout().Decode(id)
		fmt.Println(id, p.Time.Format(time.RFC3339Nano), "worker", p.WorkerID, "sequence", p.Sequence)
	}
	clk.Advance(time.Millisecond) // the next tick: the sequence starts again
	id, _ := g.Next()
	fmt.Println(id)
	// Output:
	// 132633958809628672 2025-01-01T00:00:00Z worker 7 sequence 0
	// 132633958809628673 2025-01-01T00:00:00Z worker 7 sequence 1
	// 132633958809628674 2025-01-01T00:00:00Z worker 7 sequence 2
	// 132633958813822976
}

func ExampleLayout_Decode() {
	l := snowflake.DefaultLayout()
	p, err := l.Decode(132633958809628673)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("time:", p.Time.Format(time.RFC3339Nano), "unix ms:", p.UnixMilli())
	fmt.Println("tick:", p.Tick, "worker:", p.WorkerID, "sequence:", p.Sequence)

	_, err = l.Decode(-5)
	fmt.Println(err)
	_, err = snowflake.JS53Layout().Decode(1 << 53)
	fmt.Println(err)
	// Output:
	// time: 2025-01-01T00:00:00Z unix ms: 1735689600000
	// tick: 31622400000 worker: 7 sequence: 1
	// invalid id: -5 is negative
	// invalid id: 9007199254740992 is above 9007199254740991, the largest ID of layout 41/5/7
}

func ExampleParseLayout() {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	l, err := snowflake.ParseLayout("js53", "2024-01-01T00:00:00Z", "1ms", now)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Describe())
	fmt.Println("workers:", l.MaxWorkerID()+1, "IDs/s per worker:", l.PerSecond())
	fmt.Println("largest ID:", l.MaxID(), "ends:", l.End().Format(time.RFC3339))

	_, err = snowflake.ParseLayout("41/12/11", "2024-01-01T00:00:00Z", "1ms", now)
	fmt.Println(err)
	_, err = snowflake.ParseLayout("41/10/12", "2024-01-01T00:00:00Z", "1500us", now)
	fmt.Println(err)
	// Output:
	// 41/5/7 epoch 2024-01-01T00:00:00Z unit 1ms
	// workers: 32 IDs/s per worker: 128000
	// largest ID: 9007199254740991 ends: 2093-09-06T15:47:35Z
	// invalid layout: 41/12/11 uses 64 bits, at most 63 fit a positive int64
	// invalid layout: time unit 1.5ms is not a whole number of milliseconds
}
