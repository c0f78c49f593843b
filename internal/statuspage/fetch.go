package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
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

// fetched is the outcome of one GET /clock: the peer's state, reason,
// NTP and ZooKeeper figures. Its clock offset is not measured here: the
// clock guard's peer rounds measure it (see peerCell).
type fetched struct {
	doc peerClock
	err error
}

// fetchClock asks addr for GET /clock, bounded by FetchTimeout and ctx.
func (p *Page) fetchClock(ctx context.Context, addr string) fetched {
	if err := wire.CheckHostPort(addr); err != nil {
		return fetched{err: fmt.Errorf("bad address: %w", err)}
	}
	hostPort := addr
	ctx, cancel := clock.WithTimeout(ctx, p.cfg.FetchTimeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ctx.Err() != nil || (ok && !dl.After(time.Now())) {
		return fetched{err: fmt.Errorf("GET %s: no time left for the request: %w", clockPath, errors.Join(ctx.Err(), context.DeadlineExceeded))}
	}
	scheme := "http://"
	if p.cfg.TLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+hostPort+clockPath, nil)
	if err != nil {
		return fetched{err: fmt.Errorf("GET %s: %w", clockPath, err)}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "snowflaked-status")
	resp, err := p.client.Do(req)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fetched{err: fmt.Errorf("GET %s: no answer within the %v timeout: %w", clockPath, p.cfg.FetchTimeout, err)}
	}
	if err != nil {
		return fetched{err: fmt.Errorf("GET %s: %w", clockPath, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxClockBody+1))
	switch {
	case err != nil:
		return fetched{err: fmt.Errorf("GET %s: %w", clockPath, err)}
	case resp.StatusCode != http.StatusOK:
		return fetched{err: fmt.Errorf("GET %s: status %d", clockPath, resp.StatusCode)}
	case len(body) > maxClockBody:
		return fetched{err: fmt.Errorf("GET %s: body larger than %d bytes", clockPath, maxClockBody)}
	}
	var doc peerClock
	if err := json.Unmarshal(body, &doc); err != nil {
		return fetched{err: fmt.Errorf("GET %s: decode: %w", clockPath, err)}
	}
	return fetched{doc: doc}
}
