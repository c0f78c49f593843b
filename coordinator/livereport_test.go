package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// A live holder that keeps reporting bumps its forever znode's version, so
// the second process's lease multi fails on the version check, not on the
// lease: it must still be refused with ErrLeaseHeld naming the holder (and
// not give up after restarting the claim over and over).
func TestIntegration_SameKeyLiveHolderRefusedWhileItReports(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	first := newCoord(t, testConfig(t, srv, "dup"))
	mustClaim(t, first)
	fs := &testFence{}
	fs.last.Store(time.Now().UnixMilli())
	attachAndRun(t, first, fs)
	waitFor(t, waitLong, "two reports of the holder", func() bool { return first.Status().Reports >= 2 })

	second := newCoord(t, testConfig(t, srv, "dup"))
	began := time.Now()
	_, err := second.Claim(context.Background(), Prior{})
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second Claim while the holder reports: %v, want ErrLeaseHeld", err)
	}
	for _, want := range []string{`node key "dup"`, first.cfg.Advertise, "another process"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if took := time.Since(began); took > second.staleLeaseWait()+2*time.Second {
		t.Errorf("refusal took %v, bound is %v", took, second.staleLeaseWait())
	}
	if reports := first.Status().Reports; reports < 2 {
		t.Errorf("the holder made only %d reports: the test did not exercise the version race", reports)
	}
}
