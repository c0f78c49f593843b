package client

import (
	"bytes"
	"errors"
	"slices"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// maxRelearn bounds how many times one call learns a smaller limit from
// the nodes (each smaller than the last) before it gives up: nodes with
// that many different limits are misconfigured, or lie.
const maxRelearn = 4

// serveClamped is serve within what the nodes accept. A node answers a
// count above its --max-batch with 400 invalid_count naming its limit
// (wire.ErrorDetail.Max); the client then remembers the smallest limit a
// node reported, for its lifetime, and asks for n in several requests of
// at most that, instead of failing the callers with ErrRejected. The IDs
// of several requests are sorted (they may come from different nodes), as
// are UUIDs.
//
// A tag's per-request ceiling (--max-count, RejectedError.TagMax) is
// learnt for the tag alone: a request that merged several callers
// (merged) is then asked for in parts of at most the ceiling, and no
// later batch of the tag grows beyond it; one caller's own request above
// the ceiling is refused, never split.
func (c *Client) serveClamped(ep *endpoint, n int, deadline time.Time, merged bool, want func() bool) ([]int64, error) {
	limit := c.limitFor(ep)
	if limit == 0 || n <= limit {
		ids, err := c.serve(ep, n, deadline, want)
		if nodeMax, tagMax := refusedAbove(err, n); tagMax > 0 && ep.tagMax != nil {
			ep.tagMax.Store(int64(tagMax))
			if !merged {
				return nil, err
			}
			limit = c.limitFor(ep)
		} else if nodeMax > 0 {
			limit = min(c.learnMax(nodeMax, err), c.limitFor(ep))
		} else {
			return ids, err
		}
	}
	var ids []int64
	var uuids []UUID
	relearned := 0
	for got := 0; got < n; {
		size := min(n-got, limit)
		part := *ep
		var partUUIDs []UUID
		if ep.uuids != nil {
			part.uuids = &partUUIDs
		}
		more, err := c.serve(&part, size, deadline, want)
		nodeMax, tagMax := refusedAbove(err, size)
		if tagMax > 0 && ep.tagMax != nil && relearned < maxRelearn {
			relearned++
			ep.tagMax.Store(int64(tagMax))
			limit = c.limitFor(ep)
			continue
		}
		if nodeMax > 0 && relearned < maxRelearn {
			relearned++
			limit = min(c.learnMax(nodeMax, err), c.limitFor(ep))
			continue
		}
		if err != nil {
			return nil, err
		}
		ids, uuids = append(ids, more...), append(uuids, partUUIDs...)
		got += size
	}
	if ep.uuids != nil {
		slices.SortFunc(uuids, func(a, b UUID) int { return bytes.Compare(a[:], b[:]) })
		*ep.uuids = uuids
		return nil, nil
	}
	slices.Sort(ids)
	return ids, nil
}

// limitFor is the most IDs one request of ep may ask for (0: no limit
// learnt): the smallest node limit, and the tag's ceiling for a tag.
func (c *Client) limitFor(ep *endpoint) int {
	limit := int(c.nodeMax.Load())
	if ep.tagMax != nil {
		if tm := int(ep.tagMax.Load()); tm > 0 && (limit == 0 || tm < limit) {
			limit = tm
		}
	}
	return limit
}

// refusedAbove reads a node's refusal of a count of n above its limits:
// the node's limit (RejectedError.Max) and the tag's ceiling
// (RejectedError.TagMax), each 0 unless err is such a refusal naming a
// limit below n.
func refusedAbove(err error, n int) (nodeMax, tagMax int) {
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Code != wire.CodeInvalidCount {
		return 0, 0
	}
	if rej.Max >= 1 && rej.Max < n {
		nodeMax = rej.Max
	}
	if rej.TagMax >= 1 && rej.TagMax < n {
		tagMax = rej.TagMax
	}
	return nodeMax, tagMax
}

// learnMax records a node's limit lim (from its refusal err) and returns
// the smallest limit known.
func (c *Client) learnMax(lim int, err error) int {
	for {
		old := c.nodeMax.Load()
		if old != 0 && old <= int64(lim) {
			return int(old)
		}
		if c.nodeMax.CompareAndSwap(old, int64(lim)) {
			c.log.Warn("snowflaked client: a node accepts fewer IDs a request than MaxBatch; asking for at most its limit",
				"max", lim, "max_batch", c.cfg.MaxBatch, "error", err)
			return lim
		}
	}
}
