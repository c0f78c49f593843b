// Command clientbench measures the Go client against a node running in
// another process, beside the plain HTTP calls it replaces, in one run:
//
//   - one caller: the median time of a Next and of a plain GET /id;
//   - many callers (64): IDs/s through Next and through plain GET /id;
//   - many callers with prefetch: IDs/s through Next, to compare with what
//     the node serves through /ids (make bench measures that with wrk).
//
// Each figure is printed as "name value" on a line of its own, for
// scripts/bench.sh to put side by side. The node must be in service.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client"
)

func main() {
	addr := flag.String("addr", "", "the node, host:port (required)")
	dur := flag.Duration("duration", 5*time.Second, "how long each measure runs")
	callers := flag.Int("callers", 64, "goroutines of the throughput measures")
	prefetch := flag.Int("prefetch", 4096, "Config.Prefetch of the prefetch measure")
	maxBatch := flag.Int("max-batch", 0, "Config.MaxBatch (0: the client's default)")
	maxInFlight := flag.Int("max-in-flight", 0, "Config.MaxInFlight (0: the client's default)")
	only := flag.String("only", "", "run one measure: latency, throughput (plain and next), plain, next or prefetch (default all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the client measures to this file")
	flag.Parse()
	if *addr == "" || *dur <= 0 || *callers < 1 {
		fmt.Fprintln(os.Stderr, "clientbench: give --addr host:port, a positive --duration and --callers")
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	b := bench{addr: *addr, dur: *dur, callers: *callers, maxBatch: *maxBatch, maxInFlight: *maxInFlight}
	run := func(name string) bool { return *only == "" || *only == name }
	if run("latency") {
		b.latency()
	}
	var p, n float64
	if run("throughput") || run("plain") {
		p = b.throughputPlain()
	}
	if run("throughput") || run("next") {
		n = b.throughputNext()
	}
	if p > 0 && n > 0 {
		fmt.Printf("throughput_ratio %.2f\n", n/p)
	}
	if run("prefetch") {
		b.prefetch(*prefetch)
	}
}

type bench struct {
	addr        string
	dur         time.Duration
	callers     int
	maxBatch    int
	maxInFlight int
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "clientbench:", err)
	os.Exit(1)
}

func (b bench) client(prefetch int) *client.Client {
	c, err := client.New(context.Background(), client.Config{Servers: []string{b.addr}, Prefetch: prefetch, MaxBatch: b.maxBatch, MaxInFlight: b.maxInFlight})
	if err != nil {
		fail(err)
	}
	return c
}

// plain is one GET /id on a keep-alive connection.
func plain(hc *fasthttp.Client, url string, buf []byte) ([]byte, error) {
	code, body, err := hc.Get(buf[:0], url)
	switch {
	case err != nil:
		return body, err
	case code != fasthttp.StatusOK:
		return body, fmt.Errorf("GET /id: status %d", code)
	}
	if _, err := strconv.ParseInt(string(body), 10, 64); err != nil {
		return body, fmt.Errorf("GET /id: %w", err)
	}
	return body, nil
}

// latency: one caller, a plain GET and a Next in turn, so both see the
// same machine (its noise comes in bursts longer than a call); the median
// of each.
func (b bench) latency() {
	c := b.client(0)
	defer c.Close()
	hc := &fasthttp.Client{MaxConnsPerHost: 1}
	url := "http://" + b.addr + "/id"
	ctx := context.Background()
	var plainNs, nextNs []int64
	var buf []byte
	for end := time.Now().Add(b.dur); time.Now().Before(end); {
		t0 := time.Now()
		var err error
		if buf, err = plain(hc, url, buf); err != nil {
			fail(err)
		}
		t1 := time.Now()
		if _, err := c.Next(ctx); err != nil {
			fail(err)
		}
		t2 := time.Now()
		plainNs, nextNs = append(plainNs, int64(t1.Sub(t0))), append(nextNs, int64(t2.Sub(t1)))
	}
	p, n := median(plainNs), median(nextNs)
	fmt.Printf("latency_plain_p50_us %.1f\n", p/1e3)
	fmt.Printf("latency_next_p50_us %.1f\n", n/1e3)
	fmt.Printf("latency_added_us %.1f\n", (n-p)/1e3)
}

func median(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return float64(v[len(v)/2])
}

// parallel runs f on b.callers goroutines for b.dur and returns the calls
// per second.
func (b bench) parallel(f func(buf []byte) ([]byte, error)) float64 {
	var calls atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(b.dur)
	for range b.callers {
		wg.Go(func() {
			var buf []byte
			n := int64(0)
			// The clock is read every 32 calls: reading it on every call
			// cost 7% of the client's CPU in a profile.
			for failed := false; !failed && time.Now().Before(end); {
				for range 32 {
					var err error
					if buf, err = f(buf); err != nil {
						once.Do(func() { firstErr = err })
						failed = true
						break
					}
					n++
				}
			}
			calls.Add(n)
		})
	}
	wg.Wait()
	if firstErr != nil {
		fail(firstErr)
	}
	return float64(calls.Load()) / time.Since(start).Seconds()
}

// throughputPlain: b.callers goroutines, each GET /id on a keep-alive
// connection of its own.
func (b bench) throughputPlain() float64 {
	hc := &fasthttp.Client{MaxConnsPerHost: b.callers}
	defer hc.CloseIdleConnections()
	url := "http://" + b.addr + "/id"
	p := b.parallel(func(buf []byte) ([]byte, error) { return plain(hc, url, buf) })
	fmt.Printf("throughput_plain_ids_per_s %.0f\n", p)
	return p
}

// throughputNext: b.callers goroutines calling Next.
func (b bench) throughputNext() float64 {
	c := b.client(0)
	ctx := context.Background()
	n := b.parallel(func(buf []byte) ([]byte, error) { _, err := c.Next(ctx); return buf, err })
	st := c.Stats()
	_ = c.Close()
	fmt.Printf("throughput_next_ids_per_s %.0f\n", n)
	fmt.Printf("throughput_ids_per_request %.1f\n", float64(st.IDs)/float64(max(st.Requests, 1)))
	return n
}

func (b bench) prefetch(size int) {
	c := b.client(size)
	defer c.Close()
	ctx := context.Background()
	// Warm up: the first calls wait for the first refill.
	for range size {
		if _, err := c.Next(ctx); err != nil {
			fail(err)
		}
	}
	n := b.parallel(func(buf []byte) ([]byte, error) {
		_, err := c.Next(ctx)
		if errors.Is(err, client.ErrClosed) {
			return buf, nil
		}
		return buf, err
	})
	st := c.Stats()
	fmt.Printf("prefetch_size %d\n", size)
	fmt.Printf("prefetch_next_ids_per_s %.0f\n", n)
	fmt.Printf("prefetch_ids_per_request %.1f\n", float64(st.IDs)/float64(max(st.Requests, 1)))
}
