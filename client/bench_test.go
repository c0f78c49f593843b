package client

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/node"
)

// benchGoroutines is the callers of the client benchmarks: 64, as the
// issue measures (b.SetParallelism multiplies GOMAXPROCS).
const benchGoroutines = 64

// benchNode runs a standalone node in-process on 127.0.0.1 and returns its
// address once it is in service.
func benchNode(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.WorkerID, cfg.Listen = 1, ln.Addr().String()
	cfg.CacheFile = filepath.Join(b.TempDir(), "cache.json")
	cfg.Layout = "41/3/19" // a per-worker cap far above what HTTP can carry: the benchmark measures the path, not the cap
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, cfg, zerolog.Nop(), node.WithListener(ln)) }()
	b.Cleanup(func() { cancel(); <-done })
	addr := ln.Addr().String()
	for range 500 {
		if code, _, err := fasthttp.Get(nil, "http://"+addr+"/readyz"); err == nil && code == 200 {
			return addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("node not in service within 5s")
	return ""
}

// parallelism makes RunParallel use about benchGoroutines goroutines.
func parallelism(b *testing.B) {
	b.SetParallelism(max(benchGoroutines/runtime.GOMAXPROCS(0), 1))
}

// BenchmarkClientNext: 64 goroutines calling Next through the client,
// coalesced into /ids batches against one node.
func BenchmarkClientNext(b *testing.B) {
	addr := benchNode(b)
	c, err := New(context.Background(), Config{Servers: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	parallelism(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := c.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	st := c.Stats()
	b.ReportMetric(float64(st.IDs)/float64(max(st.Requests, 1)), "ids/request")
}

// BenchmarkPlainGetID: the same goroutines doing one GET /id per ID, each
// on keep-alive connections.
func BenchmarkPlainGetID(b *testing.B) {
	addr := benchNode(b)
	hc := &fasthttp.Client{MaxConnsPerHost: benchGoroutines}
	url := "http://" + addr + "/id"
	parallelism(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			code, body, err := hc.Get(buf[:0], url)
			if err != nil || code != 200 {
				b.Errorf("GET /id: %d %v", code, err)
				return
			}
			if _, err := strconv.ParseInt(string(body), 10, 64); err != nil {
				b.Error(err)
				return
			}
			buf = body
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkClientNextLatency: one goroutine, so no coalescing: the added
// cost of a Next over a plain GET /id at low load.
func BenchmarkClientNextLatency(b *testing.B) {
	addr := benchNode(b)
	c, err := New(context.Background(), Config{Servers: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainGetIDLatency: one goroutine doing GET /id.
func BenchmarkPlainGetIDLatency(b *testing.B) {
	addr := benchNode(b)
	url := "http://" + addr + "/id"
	var buf []byte
	b.ResetTimer()
	for range b.N {
		code, body, err := fasthttp.Get(buf[:0], url)
		if err != nil || code != 200 {
			b.Fatalf("GET /id: %d %v", code, err)
		}
		buf = body
	}
}
