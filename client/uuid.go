package client

import (
	"bytes"
	"context"
	"database/sql/driver"
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

// ErrInvalidUUID is wrapped by the errors of Parse, UnmarshalText and Scan
// (it is wire.ErrInvalidUUID).
var ErrInvalidUUID = wire.ErrInvalidUUID

// uuidRawLen is the length of a UUID's binary form: its 16 bytes.
const uuidRawLen = 16

// Parse reads a UUID's canonical text form: 36 characters, 8-4-4-4-12
// hexadecimal digits (upper or lower case) between hyphens. It does not
// check the version. A bad string is an error wrapping ErrInvalidUUID.
func Parse(s string) (UUID, error) {
	u, err := wire.ParseUUID(s)
	if err != nil {
		return UUID{}, fmt.Errorf("parse uuid: %w", err)
	}
	return UUID(u), nil
}

// MarshalText is the canonical form (String), for encoding/json and the
// like.
func (u UUID) MarshalText() ([]byte, error) {
	return wire.AppendUUID(make([]byte, 0, wire.UUIDTextLen), u), nil
}

// UnmarshalText reads the canonical form (see Parse). On error u is left
// as it was.
func (u *UUID) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// Value is the canonical form (String), for database/sql: a UUID column
// or a 36-character text column.
func (u UUID) Value() (driver.Value, error) { return u.String(), nil }

// Scan reads a UUID from database/sql: a string or []byte of 36
// characters (the canonical form, see Parse) or of 16 bytes (the binary
// form, as a BINARY(16) column holds it). SQL NULL is an error: scan a
// nullable column into a sql.Null[UUID]. On error u is left as it was.
func (u *UUID) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	case nil:
		return fmt.Errorf("scan uuid: %w: NULL (scan a nullable column into a sql.Null[client.UUID])", ErrInvalidUUID)
	default:
		return fmt.Errorf("scan uuid: %w: cannot scan a %T", ErrInvalidUUID, src)
	}
	switch len(b) {
	case uuidRawLen:
		*u = UUID(b)
		return nil
	case wire.UUIDTextLen:
		v, err := Parse(string(b))
		if err != nil {
			return fmt.Errorf("scan uuid: %w", err)
		}
		*u = v
		return nil
	}
	return fmt.Errorf("scan uuid: %w: %d bytes, want %d (text) or %d (binary)", ErrInvalidUUID, len(b), wire.UUIDTextLen, uuidRawLen)
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
	us, err := c.NextUUIDN(ctx, 1)
	if err != nil {
		return UUID{}, err
	}
	return us[0], nil
}

// NextUUIDN returns n new UUIDs (1 ≤ n ≤ MaxBatch), increasing.
func (c *Client) NextUUIDN(ctx context.Context, n int) ([]UUID, error) {
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
