package health

import (
	"testing"

	"github.com/rs/zerolog"
)

// newGuard returns a guard that logs to the test log.
func newGuard(t *testing.T) *Guard {
	t.Helper()
	return New(zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger(), nil)
}

// failingDetail returns the detail of the failing check reason, and whether
// it fails.
func failingDetail(g *Guard, reason Reason) (string, bool) {
	d, ok := g.Failing()[reason]
	return d, ok
}
