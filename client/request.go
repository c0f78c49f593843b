package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// service is what a node serves a batch from. A node is marked down per
// service: its snowflake IDs depend on its clock guard, its dense IDs on
// ZooKeeper, and one may serve while the other cannot.
type service int

const (
	svcIDs service = iota
	svcSegments
	// svcOther is what serves the calls that issue nothing (Bounds): a
	// node that fails one is not marked down for IDs.
	svcOther
	numServices
)

// endpoint is one kind of batch: snowflake IDs, or the dense IDs of a tag.
type endpoint struct {
	svc  service
	path string // the request path up to and including "count="
	what string // for errors
	// uuids, when set, receives the answer as UUIDs (one a line) instead
	// of IDs: a call of its own, never a shared batch.
	uuids *[]UUID
	// unordered: the answer's IDs are distinct but in no order (a tag's
	// dense IDs: an opaque tag's are a permutation of its counter).
	unordered bool
	// header holds extra request header lines, each ending in CRLF: a
	// tag's token (Config.Tokens).
	header string
	// tagMax, for a tag's endpoint, is the tag's per-request ceiling once
	// a node named it (0 before): calls are never merged beyond it.
	tagMax *atomic.Int64
	// text, when set, receives a 200 answer's body instead of the IDs
	// (whose parsing it does: an error is the node's failure), of at most
	// textMax bytes for n; a call of its own, never a shared batch.
	text    func(body []byte, n int) error
	textMax func(n int) int
	// fixed: path is the whole request path (no count appended).
	fixed bool
}

// maxIDLine bounds one line of an answer: 19 digits and a newline.
const maxIDLine = 20

// request asks node for n IDs of ep. A node that fails (no answer, a 5xx,
// a 404 that is not snowflaked's "unknown tag", an answer that is not n
// increasing IDs) is marked down and the error returned; any other 4xx is
// ErrRejected, for every node would answer it alike.
//
// clipped says the deadline is the callers' (sooner than Timeout): a
// timeout then is theirs, and the node is not marked down for it.
func (c *Client) request(addr string, ep *endpoint, n int, deadline time.Time, clipped bool) ([]int64, error) {
	var out []int64
	status := 0
	start := time.Now()
	limit := n * maxIDLine
	switch {
	case ep.svc == svcSegments && ep.text == nil:
		// Room for a tag's IDs as text (a tag that resets by period), so
		// that the answer is read and refused as such, not taken for a
		// node's failure.
		limit = n * maxTextLine
	case ep.text != nil:
		limit = ep.textMax(n)
	case ep.uuids != nil:
		limit = n * maxUUIDLine
	}
	path := ep.path
	if !ep.fixed {
		path += strconv.Itoa(n)
	}
	err := c.pool.roundTrip(addr, path, ep.header, deadline, limit, func(a answer) error {
		status = a.status
		if a.status == 200 {
			var err error
			out, err = c.served(addr, ep, n, a.body)
			return err
		}
		return c.refused(addr, ep, a)
	})
	c.requests.Add(1)
	if err != nil && status == 0 && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%s: %w", addr, err)
		if !(clipped && isTimeout(err)) { // the callers' deadline, not the node's fault
			c.markDown(addr, ep.svc, c.cfg.DownFor, err)
		}
	}
	if h := c.cfg.Hooks.Request; h != nil {
		h(RequestEvent{Node: addr, Count: n, Status: status, Err: err, Duration: time.Since(start)})
	}
	return out, err
}

// served takes a 200 answer's body: the IDs, or what ep's text or uuids
// take. A body that is not what was asked for marks the node down.
func (c *Client) served(addr string, ep *endpoint, n int, body []byte) ([]int64, error) {
	var ids []int64
	var err error
	switch {
	case ep.text != nil:
		if err = ep.text(body, n); err != nil {
			err = fmt.Errorf("%s: bad answer to %s: %w", addr, ep.what, err)
		}
	case ep.uuids != nil:
		var us []UUID
		if us, err = parseUUIDs(body, n); err == nil {
			*ep.uuids = us
		}
	default:
		ids, err = parseIDs(body, n, !ep.unordered)
		if err != nil && ep.svc == svcSegments {
			if lines, lerr := parseLines(body, n); lerr == nil {
				// Well-formed IDs that are not numbers: the tag prints
				// its IDs in a format of its own (it resets by period).
				// Every node answers alike: the node is not at fault.
				return nil, &RejectedError{Node: addr, Status: 200, Message: fmt.Sprintf(
					"the %s are text, not numbers (e.g. %q: a tag that resets by period prints its own format): use NextSegmentText", ep.what, lines[0])}
			}
		}
	}
	if err != nil {
		if ep.text == nil {
			err = fmt.Errorf("%s: bad answer to %d %s: %w", addr, n, ep.what, err)
		}
		c.markDown(addr, ep.svc, c.cfg.DownFor, err)
		return nil, err
	}
	return ids, nil
}

// refused is the error of an answer other than 200; a node that cannot
// serve (a 5xx, a 404 that is not "unknown tag") is marked down, but for a
// 503 batch_timeout (the request's doing).
func (c *Client) refused(addr string, ep *endpoint, a answer) error {
	code, text := errorText(a.body)
	switch {
	case a.status == 503:
		err := fmt.Errorf("%s: 503 %s", addr, text)
		if code == wire.CodeBatchTimeout {
			// A batch too large for the node's per-tick capacity: the
			// request's doing, not the node's. The batch fails over,
			// the node stays in rotation.
			return err
		}
		d := c.cfg.DownFor
		if a.retryAfter > 0 {
			d = a.retryAfter
		}
		c.markDown(addr, ep.svc, d, err)
		return err
	case a.status == 404 && code == wire.CodeUnknownTag:
		return rejected(addr, a.status, a.body)
	case a.status == 404:
		// A stale address (another program now), a node without
		// segment mode, an older version: this node cannot serve it.
		err := fmt.Errorf("%s: 404 %s", addr, text)
		c.markDown(addr, ep.svc, c.cfg.DownFor, err)
		return err
	case a.status >= 400 && a.status < 500:
		return rejected(addr, a.status, a.body)
	}
	err := fmt.Errorf("%s: status %d %s", addr, a.status, text)
	c.markDown(addr, ep.svc, c.cfg.DownFor, err)
	return err
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// parseIDs reads exactly n positive IDs, each ending with a newline
// (strictly increasing when increasing; else none twice).
func parseIDs(body []byte, n int, increasing bool) ([]int64, error) {
	out := make([]int64, 0, n)
	for i := 0; i < len(body); {
		var id int64
		j := i
		for ; j < len(body) && body[j] != '\n'; j++ {
			d := body[j] - '0'
			if d > 9 || j-i >= 19 {
				return nil, fmt.Errorf("%q is not an ID", truncate(lineAt(body, i)))
			}
			id = id*10 + int64(d)
		}
		switch {
		case j == len(body): // a node ends every ID with a newline: a cut answer is refused, never shortened
			return nil, fmt.Errorf("line %q does not end", truncate(lineAt(body, i)))
		case j == i:
			return nil, errors.New("an empty line")
		case id <= 0: // 0, or 19 digits past MaxInt64
			return nil, fmt.Errorf("%q is not an ID", truncate(lineAt(body, i)))
		case len(out) == n:
			return nil, fmt.Errorf("more than the %d IDs asked for", n)
		case increasing && len(out) > 0 && id <= out[len(out)-1]:
			return nil, fmt.Errorf("IDs not increasing: %d after %d", id, out[len(out)-1])
		}
		out = append(out, id)
		i = j + 1
	}
	if len(out) != n {
		return nil, fmt.Errorf("answered %d of the %d IDs asked for", len(out), n)
	}
	if !increasing {
		sorted := slices.Clone(out)
		slices.Sort(sorted)
		for i := 1; i < len(sorted); i++ {
			if sorted[i] == sorted[i-1] {
				return nil, fmt.Errorf("ID %d twice in one answer", sorted[i])
			}
		}
	}
	return out, nil
}

// lineAt is the line of body starting at i.
func lineAt(body []byte, i int) []byte {
	l := body[i:]
	for j, b := range l {
		if b == '\n' {
			return l[:j]
		}
	}
	return l
}

// rejected is the RejectedError of a node's 4xx answer.
func rejected(addr string, status int, body []byte) *RejectedError {
	var e wire.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &RejectedError{Node: addr, Status: status, Code: e.Error.Code, Message: e.Error.Message, Max: e.Error.Max, TagMax: e.Error.TagMax}
	}
	return &RejectedError{Node: addr, Status: status, Message: strconv.Quote(truncate(body))}
}

// errorText is the code of a snowflaked JSON error and a text naming it,
// else "" and the start of the body.
func errorText(body []byte) (code, text string) {
	var e wire.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return e.Error.Code, e.Error.Code + ": " + e.Error.Message
	}
	return "", strconv.Quote(truncate(body))
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
