package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// Bounds are the IDs and UUIDs of a time range, from GET /bounds: every ID
// issued at From or later is at least MinID, every ID issued before To is
// at most MaxID (and the same for UUIDs, as strings), so
// "WHERE id BETWEEN MinID AND MaxID" selects the rows made in [From, To)
// by their ID alone.
type Bounds struct {
	// From and To are the range the node used, in UTC: the times asked for
	// truncated to the start of their tick of the cluster's layout (To
	// excluded).
	From, To time.Time
	// MinID and MaxID are the smallest and largest ID of a tick in
	// [From, To).
	MinID, MaxID int64
	// MinUUID and MaxUUID are the smallest and largest UUIDv7 of those
	// ticks, in canonical form; empty when the cluster's layout makes no
	// UUIDs.
	MinUUID, MaxUUID string
}

// maxBoundsBody bounds a /bounds answer.
const maxBoundsBody = 1024

// Bounds asks a node (with the usual failover) for the IDs of [from, to):
// see Bounds. from and to go as Unix milliseconds. A range the node
// refuses (before the layout's epoch, beyond its time field, reversed, or
// empty once truncated to ticks) is ErrRejected with code invalid_range.
func (c *Client) Bounds(ctx context.Context, from, to time.Time) (Bounds, error) {
	var out Bounds
	ep := &endpoint{
		svc: svcOther, fixed: true, what: "bounds",
		path: wire.PathBounds + "?" + wire.ParamFrom + "=" + strconv.FormatInt(from.UnixMilli(), 10) +
			"&" + wire.ParamTo + "=" + strconv.FormatInt(to.UnixMilli(), 10),
		textMax: func(int) int { return maxBoundsBody },
		text: func(body []byte, _ int) error {
			b, err := parseBounds(body)
			if err == nil {
				out = b
			}
			return err
		},
	}
	if _, err := c.call(ctx, ep, 1, nil); err != nil {
		return Bounds{}, err
	}
	return out, nil
}

// parseBounds reads a wire.BoundsBody.
func parseBounds(body []byte) (Bounds, error) {
	var w wire.BoundsBody
	if err := json.Unmarshal(body, &w); err != nil {
		return Bounds{}, fmt.Errorf("not a bounds answer: %w", err)
	}
	minID, err1 := strconv.ParseInt(w.MinID, 10, 64)
	maxID, err2 := strconv.ParseInt(w.MaxID, 10, 64)
	switch {
	case err1 != nil || err2 != nil || minID < 0 || maxID < minID:
		return Bounds{}, fmt.Errorf("min_id %q and max_id %q are not a range of IDs", w.MinID, w.MaxID)
	case w.ToMS <= w.FromMS:
		return Bounds{}, fmt.Errorf("from_ms %d is not before to_ms %d", w.FromMS, w.ToMS)
	case (w.MinUUID == "") != (w.MaxUUID == ""):
		return Bounds{}, fmt.Errorf("min_uuid %q and max_uuid %q: one without the other", w.MinUUID, w.MaxUUID)
	}
	for _, u := range []string{w.MinUUID, w.MaxUUID} {
		if _, err := wire.ParseUUID(u); u != "" && err != nil {
			return Bounds{}, err
		}
	}
	return Bounds{
		From: time.UnixMilli(w.FromMS).UTC(), To: time.UnixMilli(w.ToMS).UTC(),
		MinID: minID, MaxID: maxID, MinUUID: w.MinUUID, MaxUUID: w.MaxUUID,
	}, nil
}
