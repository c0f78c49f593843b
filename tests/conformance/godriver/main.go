// Command godriver is the Go client's conformance driver: it reads the
// requests of tests/conformance/README.md from stdin, one JSON object per
// line, calls the Go client (package client) for each, and writes the
// answers to stdout. It asserts nothing: the suite in tests/conformance
// does.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/client/tlspem"
	"codeberg.org/snowflaked/snowflaked/client/wire"
)

func main() {
	d := &driver{out: bufio.NewWriter(os.Stdout)}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		d.serve(in.Bytes())
	}
	d.closeClient()
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "godriver: stdin:", err)
		os.Exit(1)
	}
}

// request is one line of stdin; only the fields of its op are set.
type request struct {
	Seq        int64   `json:"seq"`
	Op         string  `json:"op"`
	Config     *config `json:"config"`
	N          int     `json:"n"`
	Key        string  `json:"key"`
	Tag        string  `json:"tag"`
	ID         string  `json:"id"`
	Layout     *layout `json:"layout"`
	DeadlineMs int64   `json:"deadline_ms"`
	Threads    int     `json:"threads"`
	Calls      int     `json:"calls"`
	Call       string  `json:"call"`
	Mark       int64   `json:"mark"`
	Mode       string  `json:"mode"`
	Node       string  `json:"node"`
	DurationMs int64   `json:"duration_ms"`
	WarmupMs   int64   `json:"warmup_ms"`
	// encode, decode_string, bounds, next_segment_text.
	Kind     string `json:"kind"`
	Value    string `json:"value"`
	Text     string `json:"text"`
	Encoding string `json:"encoding"`
	Bits     *uint  `json:"bits"`
	FromMs   int64  `json:"from_ms"`
	ToMs     int64  `json:"to_ms"`
	Format   string `json:"format"`
}

type config struct {
	Nodes               []string          `json:"nodes"`
	Bootstrap           []string          `json:"bootstrap"`
	BootstrapIntervalMs int64             `json:"bootstrap_interval_ms"`
	APIToken            string            `json:"api_token"`
	TagTokens           map[string]string `json:"tag_tokens"`
	TLS                 *struct {
		CA   string `json:"ca"`
		Cert string `json:"cert"`
		Key  string `json:"key"`
	} `json:"tls"`
	TimeoutMs int64 `json:"timeout_ms"`
	MaxBatch  int   `json:"max_batch"`
	Prefetch  int   `json:"prefetch"`
}

type layout struct {
	TimeBits     uint  `json:"time_bits"`
	WorkerBits   uint  `json:"worker_bits"`
	SequenceBits uint  `json:"sequence_bits"`
	GeneBits     uint  `json:"gene_bits"`
	EpochMs      int64 `json:"epoch_ms"`
	UnitMs       int64 `json:"unit_ms"`
}

// errorBody is the protocol's error object.
type errorBody struct {
	Type    string `json:"type"`
	Status  int    `json:"status,omitempty"`
	Code    string `json:"code,omitempty"`
	Max     *int   `json:"max,omitempty"`
	Message string `json:"message"`
}

type driver struct {
	outMu sync.Mutex
	out   *bufio.Writer

	c    *client.Client
	boot *client.Bootstrap
}

func (d *driver) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"seq": 0, "error": errorBody{Type: "driver", Message: err.Error()}})
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	_, _ = d.out.Write(append(b, '\n'))
	_ = d.out.Flush()
}

func (d *driver) serve(line []byte) {
	var r request
	if err := json.Unmarshal(line, &r); err != nil {
		d.write(map[string]any{"seq": r.Seq, "error": errorBody{Type: "driver", Message: "bad request line: " + err.Error()}})
		return
	}
	ans, err := d.do(&r)
	if ans == nil {
		ans = map[string]any{}
	}
	ans["seq"] = r.Seq
	if err != nil {
		ans["error"] = classify(err)
	}
	d.write(ans)
}

// driverError is a request the driver cannot carry out (not the client's
// error).
type driverError string

func (e driverError) Error() string { return string(e) }

func (d *driver) do(r *request) (map[string]any, error) {
	if r.Op == "describe" {
		return map[string]any{"client": "go", "version": "1",
			"routes": []string{wire.PathIDs, wire.PathSegment + "/{tag}", wire.PathUUIDs, wire.PathClusterNodes, wire.PathBounds},
			"codes": []string{wire.CodeBatchTimeout, wire.CodeInvalidCount, wire.CodeUnknownTag, wire.CodeGeneOff,
				wire.CodeInvalidGene, wire.CodeInvalidTag, wire.CodeInvalidFormat}}, nil
	}
	switch r.Op {
	case "open":
		return nil, d.open(r.Config)
	case "close":
		d.closeClient()
		return nil, nil
	case "decode":
		return decode(r)
	case "encode", "decode_string":
		return encoding(r)
	case "bench":
		return d.bench(r)
	}
	if d.c == nil {
		return nil, driverError("no client open")
	}
	switch r.Op {
	case "nodes":
		return map[string]any{"nodes": d.c.Nodes()}, nil
	case "load":
		return d.load(r)
	case "next_uuid":
		ctx, cancel := deadline(r.DeadlineMs)
		defer cancel()
		u, err := d.c.NextUUID(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"uuid": u.String()}, nil
	case "bounds":
		ctx, cancel := deadline(r.DeadlineMs)
		defer cancel()
		b, err := d.c.Bounds(ctx, time.UnixMilli(r.FromMs), time.UnixMilli(r.ToMs))
		if err != nil {
			return nil, err
		}
		out := map[string]any{"from_ms": b.From.UnixMilli(), "to_ms": b.To.UnixMilli(),
			"min_id": strconv.FormatInt(b.MinID, 10), "max_id": strconv.FormatInt(b.MaxID, 10)}
		if b.MinUUID != "" {
			out["min_uuid"], out["max_uuid"] = b.MinUUID, b.MaxUUID
		}
		return map[string]any{"bounds": out}, nil
	case "next_segment_text":
		ctx, cancel := deadline(r.DeadlineMs)
		defer cancel()
		n := r.N
		if n == 0 {
			n = 1
		}
		var texts []string
		var err error
		if r.Format == "" || r.Format == "text" {
			texts, err = d.c.NextSegmentText(ctx, r.Tag, n)
		} else {
			enc, perr := client.ParseEncoding(r.Format)
			if perr != nil {
				return nil, perr
			}
			texts, err = d.c.NextSegmentEncoded(ctx, r.Tag, n, enc)
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"texts": texts}, nil
	}
	ids, err := d.call(r.Op, r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"ids": strs(ids)}, nil
}

func (d *driver) call(op string, r *request) ([]int64, error) {
	ctx, cancel := deadline(r.DeadlineMs)
	defer cancel()
	switch op {
	case "next_id":
		id, err := d.c.Next(ctx)
		return []int64{id}, err
	case "next_ids":
		return d.c.NextN(ctx, r.N)
	case "next_gene":
		key, err := strconv.ParseUint(r.Key, 10, 64)
		if err != nil {
			return nil, driverError("key: " + err.Error())
		}
		id, err := d.c.NextGene(ctx, key)
		return []int64{id}, err
	case "next_segment":
		if r.N == 0 {
			id, err := d.c.NextSegment(ctx, r.Tag)
			return []int64{id}, err
		}
		return d.c.NextSegmentN(ctx, r.Tag, r.N)
	}
	return nil, driverError("unknown op " + strconv.Quote(op))
}

func deadline(ms int64) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
}

func (d *driver) open(cfg *config) error {
	d.closeClient()
	if cfg == nil {
		return driverError("open without config")
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		pool, err := tlspem.CA(cfg.TLS.CA)
		if err != nil {
			return driverError(err.Error())
		}
		tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cfg.TLS.Cert != "" {
			pair, err := tlspem.Pair(cfg.TLS.Cert, cfg.TLS.Key)
			if err != nil {
				return driverError(err.Error())
			}
			tlsCfg.Certificates = []tls.Certificate{pair}
		}
	}
	cc := client.Config{Servers: cfg.Nodes, Tokens: cfg.TagTokens, APIToken: cfg.APIToken, TLS: tlsCfg,
		Timeout: time.Duration(cfg.TimeoutMs) * time.Millisecond, MaxBatch: cfg.MaxBatch, Prefetch: cfg.Prefetch}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(cfg.Bootstrap) > 0 {
		b, err := client.NewBootstrap(ctx, client.BootstrapConfig{Seeds: cfg.Bootstrap, TLS: tlsCfg,
			Interval: time.Duration(cfg.BootstrapIntervalMs) * time.Millisecond})
		if err != nil {
			return err
		}
		d.boot, cc.Discovery = b, b
	}
	c, err := client.New(ctx, cc)
	if err != nil {
		d.closeClient()
		return err
	}
	d.c = c
	return nil
}

func (d *driver) closeClient() {
	if d.c != nil {
		_ = d.c.Close()
		d.c = nil
	}
	if d.boot != nil {
		_ = d.boot.Close()
		d.boot = nil
	}
}

func (d *driver) load(r *request) (map[string]any, error) {
	if r.Threads < 1 || r.Calls < 1 {
		return nil, driverError("load: threads and calls must be at least 1")
	}
	var done atomic.Int64
	var marked sync.Once
	threads := make([][]string, r.Threads)
	failures := make([][]errorBody, r.Threads)
	var wg sync.WaitGroup
	for t := range r.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range r.Calls {
				ids, err := d.call(r.Call, r)
				if err != nil {
					failures[t] = append(failures[t], classify(err))
				} else {
					threads[t] = append(threads[t], strs(ids)...)
				}
				if done.Add(1) >= r.Mark && r.Mark > 0 {
					marked.Do(func() { d.write(map[string]any{"seq": r.Seq, "event": "mark"}) })
				}
			}
		}()
	}
	wg.Wait()
	return map[string]any{"threads": threads, "failures": slices.Concat(failures...), "calls": done.Load()}, nil
}

func (d *driver) bench(r *request) (map[string]any, error) {
	if r.Threads < 1 || r.DurationMs < 1 {
		return nil, driverError("bench: threads and duration_ms must be at least 1")
	}
	var call func() error
	switch r.Mode {
	case "client":
		if d.c == nil {
			return nil, driverError("no client open")
		}
		call = func() error { _, err := d.c.Next(context.Background()); return err }
	case "plain":
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: r.Threads + 1}}
		defer hc.CloseIdleConnections()
		url := "http://" + r.Node + wire.PathID
		call = func() error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET /id: %s", resp.Status)
			}
			return err
		}
	default:
		return nil, driverError("bench: mode must be client or plain")
	}
	start := time.Now()
	measureFrom := start.Add(time.Duration(r.WarmupMs) * time.Millisecond)
	end := measureFrom.Add(time.Duration(r.DurationMs) * time.Millisecond)
	lat := make([][]time.Duration, r.Threads)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for t := range r.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				err := call()
				if t0.After(measureFrom) {
					if err != nil {
						failed.Add(1)
					}
					lat[t] = append(lat[t], time.Since(t0))
				}
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return nil, driverError("bench: no call finished")
	}
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	return map[string]any{"calls": len(all), "failed": failed.Load(), "seconds": float64(r.DurationMs) / 1e3,
		"p50_us": pct(0.5), "p99_us": pct(0.99)}, nil
}

func decode(r *request) (map[string]any, error) {
	if r.Layout == nil {
		return nil, driverError("decode without layout")
	}
	id, err := strconv.ParseInt(r.ID, 10, 64)
	if err != nil {
		return nil, driverError("id: " + err.Error())
	}
	l := client.Layout{TimeBits: r.Layout.TimeBits, WorkerBits: r.Layout.WorkerBits, SequenceBits: r.Layout.SequenceBits,
		GeneBits: r.Layout.GeneBits, Epoch: time.UnixMilli(r.Layout.EpochMs), Unit: time.Duration(r.Layout.UnitMs) * time.Millisecond}
	p, err := l.Decode(id)
	if err != nil {
		return nil, err
	}
	dec := map[string]any{"timestamp_ms": p.UnixMilli, "worker_id": p.WorkerID, "sequence": p.Sequence}
	if l.GeneBits > 0 {
		dec["gene"] = p.Gene
	}
	return map[string]any{"decoded": dec}, nil
}

// encoding does encode and decode_string with the client's functions.
func encoding(r *request) (map[string]any, error) {
	enc, err := client.ParseEncoding(r.Encoding)
	if err != nil {
		return nil, err
	}
	bits := uint(63)
	if r.Bits != nil {
		bits = *r.Bits
	}
	switch {
	case r.Op == "encode" && r.Kind == "uuid":
		u, err := client.Parse(r.Value)
		if err != nil {
			return nil, driverError("value: " + err.Error())
		}
		s, err := client.EncodeUUID(u, enc)
		return map[string]any{"text": s}, err
	case r.Op == "encode":
		id, err := strconv.ParseInt(r.Value, 10, 64)
		if err != nil {
			return nil, driverError("value: " + err.Error())
		}
		s, err := client.EncodeID(id, bits, enc)
		return map[string]any{"text": s}, err
	case r.Kind == "uuid":
		u, err := client.DecodeUUID(r.Text, enc)
		if err != nil {
			return nil, err
		}
		return map[string]any{"value": u.String()}, nil
	default:
		id, err := client.DecodeID(r.Text, bits, enc)
		if err != nil {
			return nil, err
		}
		return map[string]any{"value": strconv.FormatInt(id, 10)}, nil
	}
}

func classify(err error) errorBody {
	var rej *client.RejectedError
	var de driverError
	switch {
	case errors.As(err, &de):
		return errorBody{Type: "driver", Message: err.Error()}
	case errors.Is(err, idtext.ErrWidth):
		return errorBody{Type: "encoding", Code: "width", Message: err.Error()}
	case errors.Is(err, idtext.ErrChar):
		return errorBody{Type: "encoding", Code: "character", Message: err.Error()}
	case errors.Is(err, idtext.ErrRange):
		return errorBody{Type: "encoding", Code: "range", Message: err.Error()}
	case errors.Is(err, idtext.ErrEncoding):
		return errorBody{Type: "encoding", Code: "encoding", Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return errorBody{Type: "deadline", Message: err.Error()}
	case errors.As(err, &rej):
		b := errorBody{Type: "rejected", Status: rej.Status, Code: rej.Code, Message: err.Error()}
		if rej.Max > 0 {
			b.Max = &rej.Max
		}
		return b
	case errors.Is(err, client.ErrNoNode):
		return errorBody{Type: "no_node", Message: err.Error()}
	case errors.Is(err, client.ErrClosed):
		return errorBody{Type: "closed", Message: err.Error()}
	}
	return errorBody{Type: "other", Message: err.Error()}
}

func strs(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}
