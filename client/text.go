package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"codeberg.org/snowflaked/snowflaked/client/idtext"
	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// Encoding is a fixed-width text form of IDs and UUIDs (package
// client/idtext): Base62, Base58, Base36 or Base32 (Crockford's). Its
// alphabets are in ASCII order and its strings of one size have one width,
// so they sort, byte by byte, as the numbers do. Nodes answer in it with
// ?format=base62 and the like.
type Encoding = idtext.Encoding

// The encodings (see Encoding).
const (
	// Base62 is 0-9 A-Z a-z: 11 characters for an ID, 22 for a UUID.
	Base62 = idtext.Base62
	// Base58 is Bitcoin's alphabet, without 0, O, I and l: 11 and 22.
	Base58 = idtext.Base58
	// Base36 is 0-9 a-z, read in either case: 13 and 25.
	Base36 = idtext.Base36
	// Base32 is Crockford's, read in either case with I and L as 1 and O
	// as 0: 13 and 26.
	Base32 = idtext.Base32
)

// DenseIDBits is the size of a segment tag's dense IDs (any positive
// int64), for EncodeID and DecodeID.
const DenseIDBits = 63

// ParseEncoding returns the encoding of a name as the API writes it:
// base62, base58, base36 or base32.
func ParseEncoding(name string) (Encoding, error) {
	e, err := idtext.Parse(name)
	if err != nil {
		return 0, fmt.Errorf("parse encoding: %w", err)
	}
	return e, nil
}

// IDBits is the size of the layout's IDs: its time, worker and sequence
// bits (63 for 41/10/12, 53 for js53), for EncodeID and DecodeID.
func (l Layout) IDBits() uint { return l.TimeBits + l.WorkerBits + l.SequenceBits }

// EncodeID writes id, an ID of bits bits (Layout.IDBits, or DenseIDBits
// for a tag's IDs), in enc: the string a node answers with
// ?format=<enc>. A negative id, or one of 2^bits or more, is an error
// wrapping ErrInvalidID.
func EncodeID(id int64, bits uint, enc Encoding) (string, error) {
	if id < 0 {
		return "", fmt.Errorf("encode id: %w: %d is negative", ErrInvalidID, id)
	}
	s, err := enc.EncodeUint(uint64(id), bits)
	if err != nil {
		return "", fmt.Errorf("encode id %d: %w: %w", id, ErrInvalidID, err)
	}
	return s, nil
}

// DecodeID reads an ID of bits bits that EncodeID wrote in enc. A string
// of another width, with a character outside enc's alphabet, or of a value
// of 2^bits or more is an error wrapping ErrInvalidID and idtext's
// ErrWidth, ErrChar or ErrRange.
func DecodeID(s string, bits uint, enc Encoding) (int64, error) {
	if bits > DenseIDBits {
		return 0, fmt.Errorf("decode id: %w: %d bits, at most %d", ErrInvalidID, bits, DenseIDBits)
	}
	v, err := enc.DecodeUint(s, bits)
	if err != nil {
		return 0, fmt.Errorf("decode id: %w: %w", ErrInvalidID, err)
	}
	return int64(v), nil
}

// EncodeUUID writes u's 16 bytes, one big-endian number, in enc: the
// string /uuid?format=<enc> answers.
func EncodeUUID(u UUID, enc Encoding) (string, error) {
	s, err := enc.EncodeUUID(u)
	if err != nil {
		return "", fmt.Errorf("encode uuid: %w", err)
	}
	return s, nil
}

// DecodeUUID reads a UUID that EncodeUUID wrote in enc. Errors wrap
// ErrInvalidUUID and idtext's ErrWidth, ErrChar or ErrRange.
func DecodeUUID(s string, enc Encoding) (UUID, error) {
	u, err := enc.DecodeUUID(s)
	if err != nil {
		return UUID{}, fmt.Errorf("decode uuid: %w: %w", ErrInvalidUUID, err)
	}
	return UUID(u), nil
}

// maxTextLine bounds one line of a text answer of a tag: its string and a
// newline.
const maxTextLine = 128

// NextSegmentText returns n (1 ≤ n ≤ MaxBatch) of tag's IDs as the node
// writes them, one string each: GET /segment/{tag}?count=n as text. For a
// plain or opaque tag they are the decimal IDs; for a tag whose IDs are
// not plain numbers (a formatted order number) the only way to get them.
// Like NextGene, each call is its own request, never merged with others.
func (c *Client) NextSegmentText(ctx context.Context, tag string, n int) ([]string, error) {
	return c.segmentText(ctx, tag, n, "")
}

// NextSegmentEncoded is NextSegmentText in enc: tag's IDs as fixed-width
// strings (?format=<enc>), which sort as the IDs do.
func (c *Client) NextSegmentEncoded(ctx context.Context, tag string, n int, enc Encoding) ([]string, error) {
	if enc.Width(DenseIDBits) == 0 {
		c.errs.Add(1)
		return nil, &RejectedError{Code: wire.CodeInvalidFormat, Message: fmt.Sprintf("next %d IDs of %s: %s is no encoding", n, tag, enc)}
	}
	return c.segmentText(ctx, tag, n, enc.String())
}

// segmentText does NextSegmentText in format ("" for the plain text).
func (c *Client) segmentText(ctx context.Context, tag string, n int, format string) ([]string, error) {
	bad := checkTag(tag)
	if bad == nil && (n < 1 || n > c.cfg.MaxBatch) {
		bad = &RejectedError{Code: wire.CodeInvalidCount, Message: fmt.Sprintf("next %d IDs of %s as text: want 1..%d", n, tag, c.cfg.MaxBatch)}
	}
	path := wire.SegmentPath(tag) + "?"
	if format != "" {
		path += wire.ParamFormat + "=" + format + "&"
	}
	var out []string
	ep := &endpoint{
		svc: svcSegments, path: path + wire.ParamCount + "=", what: "IDs of " + tag + " as text",
		header:  bearer(c.cfg.Tokens[tag]),
		textMax: func(n int) int { return n * maxTextLine },
		text: func(body []byte, n int) error {
			lines, err := parseLines(body, n)
			if err == nil {
				out = append(out, lines...) // a split request's parts, in order
			}
			return err
		},
	}
	if _, err := c.call(ctx, ep, n, bad); err != nil {
		return nil, err
	}
	c.counted(len(out))
	return out, nil
}

// parseLines reads exactly n lines, each ending in a newline, of 1 to
// maxTextLine-1 printable ASCII characters.
func parseLines(body []byte, n int) ([]string, error) {
	out := make([]string, 0, n)
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		if i < 0 {
			return nil, fmt.Errorf("line %q does not end", truncate(body))
		}
		line := body[:i]
		body = body[i+1:]
		if len(line) == 0 {
			return nil, errors.New("an empty line")
		}
		for _, b := range line {
			if b < 0x21 || b > 0x7e {
				return nil, fmt.Errorf("line %q is not printable ASCII", truncate(line))
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("more than the %d lines asked for", n)
		}
		out = append(out, string(line))
	}
	if len(out) != n {
		return nil, fmt.Errorf("%d lines, want %d", len(out), n)
	}
	return out, nil
}
