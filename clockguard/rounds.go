package clockguard

import (
	"context"
	"time"
)

// runRounds calls round at once and then every interval, until ctx ends. It
// is the Run loop of the NTP and peer checks.
func runRounds(ctx context.Context, interval time.Duration, round func()) {
	round()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			round()
		}
	}
}
