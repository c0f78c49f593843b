package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// request asks node for n IDs. A node that fails (no answer, 5xx, an answer
// that is not n increasing IDs) is marked down and the error returned; a
// 4xx is ErrRejected.
func (c *Client) request(addr string, n int) ([]int64, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + "/ids?count=" + strconv.Itoa(n))
	req.Header.SetMethod(fasthttp.MethodGet)
	start := time.Now()
	err := c.http.DoTimeout(req, resp, c.cfg.Timeout)
	c.requests.Add(1)
	status := 0
	if err == nil {
		status = resp.StatusCode()
	}
	var out []int64
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", addr, err)
		c.markDown(addr, c.cfg.DownFor, err)
	case status == fasthttp.StatusOK:
		if out, err = parseIDs(resp.Body(), n); err != nil {
			err = fmt.Errorf("%s: bad answer to %d IDs: %w", addr, n, err)
			c.markDown(addr, c.cfg.DownFor, err)
		}
	case status == fasthttp.StatusServiceUnavailable:
		err = fmt.Errorf("%s: 503 %s", addr, errorText(resp.Body()))
		c.markDown(addr, retryAfter(resp, c.cfg.DownFor), err)
	case status >= 400 && status < 500:
		err = fmt.Errorf("%w: %s: %d %s", ErrRejected, addr, status, errorText(resp.Body()))
	default:
		err = fmt.Errorf("%s: status %d %s", addr, status, errorText(resp.Body()))
		c.markDown(addr, c.cfg.DownFor, err)
	}
	if h := c.cfg.Hooks.Request; h != nil {
		h(addr, status, err, time.Since(start))
	}
	return out, err
}

// parseIDs reads exactly n strictly increasing positive IDs, one a line.
func parseIDs(body []byte, n int) ([]int64, error) {
	out := make([]int64, 0, n)
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(line) == 0 {
			continue
		}
		id, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not an ID", truncate(line))
		}
		if len(out) > 0 && id <= out[len(out)-1] {
			return nil, fmt.Errorf("IDs not increasing: %d after %d", id, out[len(out)-1])
		}
		if len(out) == n {
			return nil, fmt.Errorf("more than the %d IDs asked for", n)
		}
		out = append(out, id)
	}
	if len(out) != n {
		return nil, fmt.Errorf("answered %d of the %d IDs asked for", len(out), n)
	}
	return out, nil
}

// errorText is the code and message of a snowflaked JSON error, else the
// start of the body.
func errorText(body []byte) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return e.Error.Code + ": " + e.Error.Message
	}
	return strconv.Quote(truncate(body))
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// retryAfter is the Retry-After of a 503 in seconds, else def.
func retryAfter(resp *fasthttp.Response, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(string(resp.Header.Peek("Retry-After"))); err == nil && s > 0 && s < 3600 {
		return time.Duration(s) * time.Second
	}
	return def
}

// prefetch holds IDs fetched ahead for Next.
type prefetch struct {
	want int
	kick chan struct{}

	mu     sync.Mutex
	buf    []int64
	at     time.Time     // when the oldest IDs in buf were fetched
	refill chan struct{} // non-nil while a refill is in flight; closed when it ends
}

func (p *prefetch) init(want int) {
	p.want, p.kick = want, make(chan struct{}, 1)
}

// take pops the next prefetched ID unless the buffer is empty or older
// than maxAge (then it is dropped), and asks for a refill below half. With
// the buffer empty it returns the refill in flight, if any, to wait for.
func (p *prefetch) take(maxAge time.Duration) (int64, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 && time.Since(p.at) > maxAge {
		p.buf = nil // too old: the time inside the IDs would lag
	}
	if len(p.buf) < p.want/2+1 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	if len(p.buf) == 0 {
		return 0, false, p.refill
	}
	id := p.buf[0]
	p.buf = p.buf[1:]
	return id, true, nil
}

// begin marks a refill in flight and returns how many IDs it should fetch.
func (p *prefetch) begin() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refill = make(chan struct{})
	return p.want - len(p.buf)
}

// end appends what the refill fetched (none when it failed) and wakes
// whoever waits for it.
func (p *prefetch) end(ids []int64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) == 0 {
		p.at = at
	}
	p.buf = append(p.buf, ids...)
	close(p.refill)
	p.refill = nil
}

// prefetchLoop refills the prefetch buffer when Next asks for it.
func (c *Client) prefetchLoop() {
	defer c.done.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.pre.kick:
		}
		n := c.pre.begin()
		if n <= 0 {
			c.pre.end(nil, time.Time{})
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout*time.Duration(c.cfg.Attempts))
		at := time.Now()
		ids, err := c.NextN(ctx, n)
		cancel()
		if err == nil {
			c.ids.Add(-int64(len(ids))) // counted when Next hands them out
		}
		c.pre.end(ids, at) // nil on error: waiting callers ask a node themselves
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil:
			c.log.Warn().Err(err).Msg("snowflaked client: prefetch failed")
		}
	}
}
