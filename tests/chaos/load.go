package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Target is a node the load generator calls.
type Target interface {
	// Name identifies the node in the Checker.
	Name() string
	// Addr is the node's "127.0.0.1:port" (it may change when it restarts).
	Addr() string
	// Incarnation is the process run answering at Addr: 0, then one more
	// per restart. It must change before the new process is started.
	Incarnation() int
}

// LoadConfig configures a load generator. Zero values take the defaults.
type LoadConfig struct {
	// ClientsPerNode sequential clients call each node: the even ones GET
	// /id, the odd ones GET /ids?count=N (default 2).
	ClientsPerNode int
	// Rate is each client's requests per second (default 200): the load
	// stays far from saturating the machine, so the clock checks are judged
	// and not the scheduler.
	Rate float64
	// MaxCount is the largest N of /ids; N is drawn in 1..MaxCount
	// (default 200).
	MaxCount int
	// Seed seeds the counts.
	Seed uint64
	// Timeout bounds one request (default 3s).
	Timeout time.Duration
	// MaxDuration bounds the whole run (default 10m): the clients stop by
	// themselves after it.
	MaxDuration time.Duration
}

func (c LoadConfig) withDefaults() LoadConfig {
	if c.ClientsPerNode <= 0 {
		c.ClientsPerNode = 2
	}
	if c.Rate <= 0 {
		c.Rate = 200
	}
	if c.MaxCount <= 0 {
		c.MaxCount = 200
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
	if c.MaxDuration <= 0 {
		c.MaxDuration = 10 * time.Minute
	}
	return c
}

// Load is a running load generator.
type Load struct {
	checker *Checker
	cfg     LoadConfig
	client  *http.Client
	targets map[string]*loadTarget
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type loadTarget struct {
	Target
	paused   atomic.Bool
	inflight atomic.Int32
}

// StartLoad starts cfg.ClientsPerNode clients per target, each recording
// what it gets in c, until Stop (or cfg.MaxDuration).
func StartLoad(c *Checker, targets []Target, cfg LoadConfig) *Load {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.MaxDuration)
	tr := &http.Transport{
		MaxIdleConnsPerHost: 2 * cfg.ClientsPerNode, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true, ResponseHeaderTimeout: cfg.Timeout,
	}
	l := &Load{
		checker: c, cfg: cfg, cancel: cancel, targets: map[string]*loadTarget{},
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout},
	}
	maxRequests := int(cfg.Rate*cfg.MaxDuration.Seconds()) + 1
	client := 0
	for ti, tg := range targets {
		lt := &loadTarget{Target: tg}
		l.targets[tg.Name()] = lt
		for k := range cfg.ClientsPerNode {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(ti*1000+k)))
			id := client
			client++
			l.wg.Go(func() { l.run(ctx, lt, id, k%2 == 1, rng, maxRequests) })
		}
	}
	return l
}

// run is one sequential client.
func (l *Load) run(ctx context.Context, tg *loadTarget, client int, batch bool, rng *rand.Rand, maxRequests int) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.cfg.Rate))
	defer tick.Stop()
	for range maxRequests {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if tg.paused.Load() {
			continue
		}
		tg.inflight.Add(1)
		if tg.paused.Load() { // Pause came in between: it may be waiting for us
			tg.inflight.Add(-1)
			continue
		}
		count := 1
		if batch {
			count = 1 + rng.IntN(l.cfg.MaxCount)
		}
		l.once(ctx, tg, client, batch, count)
		tg.inflight.Add(-1)
	}
}

// once makes one request and records its outcome.
func (l *Load) once(ctx context.Context, tg *loadTarget, client int, batch bool, count int) {
	path := "/id"
	if batch {
		path = "/ids?count=" + strconv.Itoa(count)
	}
	inc := tg.Incarnation()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+tg.Addr()+path, nil)
	if err != nil {
		l.checker.RecordBadBody(tg.Name(), fmt.Errorf("build request %s: %w", path, err))
		return
	}
	sent := l.checker.Since()
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.checker.RecordTransportError(tg.Name())
		}
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	recv := l.checker.Since()
	if err != nil {
		if ctx.Err() == nil {
			l.checker.RecordTransportError(tg.Name())
		}
		return
	}
	if resp.StatusCode != http.StatusOK {
		l.checker.RecordFailure(tg.Name(), resp.StatusCode, resp.Header.Get("Retry-After"), body)
		return
	}
	ids, err := parseIDs(body)
	if err == nil && len(ids) != count {
		err = fmt.Errorf("%d IDs for %s", len(ids), path)
	}
	if err != nil {
		l.checker.RecordBadBody(tg.Name(), fmt.Errorf("GET %s: %w", path, err))
		return
	}
	if tg.Incarnation() != inc {
		inc = -1 // restarted meanwhile: cannot tell which run answered
	}
	l.checker.Record(Batch{Node: tg.Name(), Incarnation: inc, Client: client, Sent: sent, Recv: recv, IDs: ids})
}

// parseIDs reads the text body of /id or /ids: decimal IDs, one per line.
func parseIDs(body []byte) ([]int64, error) {
	ids := make([]int64, 0, bytes.Count(body, []byte{'\n'})+1)
	for _, f := range bytes.Fields(body) {
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ID %q: %w", f, err)
		}
		ids = append(ids, v)
	}
	return ids, nil
}

// ErrUnknownTarget is returned for a node name the load does not call.
var ErrUnknownTarget = errors.New("unknown load target")

// Pause stops sending to the node and waits until none of its requests is
// in flight.
func (l *Load) Pause(name string) error {
	tg := l.targets[name]
	if tg == nil {
		return fmt.Errorf("pause %q: %w", name, ErrUnknownTarget)
	}
	tg.paused.Store(true)
	deadline := time.Now().Add(l.cfg.Timeout + time.Second)
	for range 10000 { // bounded; the deadline ends it first
		if tg.inflight.Load() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("pause %q: %d requests still in flight", name, tg.inflight.Load())
}

// Resume sends to the node again.
func (l *Load) Resume(name string) error {
	tg := l.targets[name]
	if tg == nil {
		return fmt.Errorf("resume %q: %w", name, ErrUnknownTarget)
	}
	tg.paused.Store(false)
	return nil
}

// Stop stops every client and waits for them (bounded).
func (l *Load) Stop() error {
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	timer := time.NewTimer(l.cfg.Timeout + 5*time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return errors.New("load clients did not stop")
	}
	l.client.CloseIdleConnections()
	return nil
}
