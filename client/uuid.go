package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// UUID is an RFC 9562 version 7 UUID from snowflaked's /uuids: its time
// is a snowflake ID's and it is unique across the cluster by construction.
type UUID [16]byte

// String is the canonical form: 36 lower-case characters, 8-4-4-4-12
// (wire.FormatUUID).
func (u UUID) String() string { return wire.FormatUUID(u) }

// Time is the UUID's unix_ts_ms field: the snowflake ID's time.
func (u UUID) Time() time.Time {
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return time.UnixMilli(ms).UTC()
}

// maxUUIDLine bounds one line of a /uuids answer: 36 characters and a
// newline.
const maxUUIDLine = wire.UUIDTextLen + 1

// parseUUIDs reads exactly n canonical version 7 UUIDs, one a line,
// increasing (as a node hands them out).
func parseUUIDs(body []byte, n int) ([]UUID, error) {
	out := make([]UUID, 0, n)
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		raw, err := wire.ParseUUID(string(line))
		if err != nil {
			return nil, fmt.Errorf("line %q is not a UUID", truncate(line))
		}
		u := UUID(raw)
		if u[6]>>4 != 7 || u[8]>>6 != 0b10 {
			return nil, fmt.Errorf("%s is not a version 7 UUID with the RFC variant", u)
		}
		if len(out) > 0 && bytes.Compare(u[:], out[len(out)-1][:]) <= 0 {
			return nil, fmt.Errorf("%s does not follow %s: not increasing", u, out[len(out)-1])
		}
		out = append(out, u)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%d UUIDs, want %d", len(out), n)
	}
	return out, nil
}

// NextUUID returns one new UUIDv7 (see UUID), with the usual failover.
// Like NextGene, each call is its own request, never merged or prefetched.
func (c *Client) NextUUID(ctx context.Context) (UUID, error) {
	us, err := c.NextUUIDs(ctx, 1)
	if err != nil {
		return UUID{}, err
	}
	return us[0], nil
}

// NextUUIDs returns n new UUIDs (1 ≤ n ≤ MaxBatch), increasing.
func (c *Client) NextUUIDs(ctx context.Context, n int) ([]UUID, error) {
	var bad error
	if n < 1 || n > c.cfg.MaxBatch {
		bad = &RejectedError{Code: wire.CodeInvalidCount, Message: fmt.Sprintf("next %d UUIDs: want 1..%d", n, c.cfg.MaxBatch)}
	}
	var out []UUID
	if _, err := c.direct(ctx, &endpoint{svc: svcIDs, path: wire.PathUUIDs + "?" + wire.ParamCount + "=", what: "UUIDs", uuids: &out, header: bearer(c.cfg.APIToken)}, n, bad); err != nil {
		return nil, err
	}
	if len(out) != n {
		c.errs.Add(1)
		return nil, errors.New("next UUIDs: no answer recorded") // serve returned without a parsed answer
	}
	return out, nil
}
