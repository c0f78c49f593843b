package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
)

// clockPath is the path of the peers' drift report.
const clockPath = "/clock"

// peerClock is what the page reads of a peer's GET /clock; the sections
// decode into the types that produce them, so their fields stay in step.
type peerClock struct {
	WorkerID *int64                  `json:"worker_id"`
	NowMs    int64                   `json:"now_ms"`
	FenceMs  int64                   `json:"fence_ms"`
	State    string                  `json:"state"`
	Reason   string                  `json:"reason"`
	Detail   string                  `json:"detail"`
	NTP      *clockguard.NTPSnapshot `json:"ntp"`
	ZK       *coordinator.Status     `json:"zk"`
}

// fetched is the outcome of one GET /clock.
type fetched struct {
	doc peerClock
	// offset is the peer's clock minus this node's, corrected for half the
	// round trip (the peer's now_ms is taken at the middle of its
	// millisecond).
	offset time.Duration
	rtt    time.Duration
	err    error
}

// checkAddr accepts "host:port" with a hostname or IP and a valid port, so
// that an address from ZooKeeper cannot turn into another URL.
func checkAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("bad address %q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad address %q: port must be 1..65535", addr)
	}
	if host == "" {
		return "", fmt.Errorf("bad address %q: no host", addr)
	}
	if net.ParseIP(host) == nil {
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
				return "", fmt.Errorf("bad address %q: host must be a hostname or an IP", addr)
			}
		}
	}
	return net.JoinHostPort(host, port), nil
}

// fetchClock asks addr for GET /clock, bounded by FetchTimeout and ctx.
func (p *Page) fetchClock(ctx context.Context, addr string) fetched {
	hostPort, err := checkAddr(addr)
	if err != nil {
		return fetched{err: err}
	}
	timeout := p.cfg.FetchTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return fetched{err: fmt.Errorf("GET %s: no time left for the request: %w", clockPath, errors.Join(err, context.DeadlineExceeded))}
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	scheme := "http://"
	if p.cfg.TLS != nil {
		scheme = "https://"
	}
	req.SetRequestURI(scheme + hostPort + clockPath)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.Header.Set("Accept", "application/json")

	clk := p.cfg.Clock
	sendWall := clk.WallNanos()
	m0 := clk.Mono()
	err = p.client.DoTimeout(req, resp, timeout)
	m1 := clk.Mono()
	if err != nil {
		return fetched{err: fmt.Errorf("GET %s: %w", clockPath, err)}
	}
	if sc := resp.StatusCode(); sc != fasthttp.StatusOK {
		return fetched{err: fmt.Errorf("GET %s: status %d", clockPath, sc)}
	}
	var doc peerClock
	if err := json.Unmarshal(resp.Body(), &doc); err != nil {
		return fetched{err: fmt.Errorf("GET %s: decode: %w", clockPath, err)}
	}
	f := fetched{doc: doc, rtt: m1 - m0}
	if doc.NowMs <= 0 {
		return f // no clock reading: the view says so
	}
	peerNs := doc.NowMs*int64(time.Millisecond) + int64(time.Millisecond/2)
	f.offset = time.Duration(peerNs - (sendWall + int64(f.rtt/2)))
	return f
}
