package node

import (
	"context"
	"math"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Time-field overflow warning (the node warns long before the
// timestamp field runs out, by log and by the metric
// snowflaked_time_field_years_left).
const (
	// yearsLeftWarning: with fewer years left in the layout's timestamp
	// field, the node logs a warning at start and at every check.
	yearsLeftWarning = 2.0
	// yearsLeftCheckInterval is how often a running node checks again, so a
	// node that runs for months still warns when the limit comes near.
	yearsLeftCheckInterval = time.Hour
)

// secondsPerYear is the length of a Julian year, as the metric counts it.
const secondsPerYear = 365.25 * 24 * 3600

// yearsLeft returns the years until the layout's timestamp field runs out,
// by the node's clock (negative once it has).
func (n *node) yearsLeft() float64 {
	return float64(n.layout.End().UnixNano()-n.clock.WallNanos()) / 1e9 / secondsPerYear
}

// checkTimeField logs a warning when fewer than yearsLeftWarning years are
// left, and returns the years left.
func (n *node) checkTimeField() float64 {
	years := n.yearsLeft()
	if years < yearsLeftWarning {
		n.log.Warn().Float64("years_left", math.Round(years*1000)/1000).
			Str("ends", n.layout.End().UTC().Format(time.RFC3339)).Str("layout", n.layout.String()).
			Str("epoch", n.layout.Epoch.UTC().Format(time.RFC3339)).
			Msg("the timestamp field of the layout runs out soon: plan a new epoch or layout")
	}
	return years
}

// watchTimeField repeats checkTimeField every yearsLeftCheckInterval until
// ctx ends.
func (n *node) watchTimeField(ctx context.Context) {
	d := n.seams.yearsLeftEvery
	if d <= 0 {
		d = yearsLeftCheckInterval
	}
	clock.Every(ctx, d, nil, func() { n.checkTimeField() })
}
