package ntpharness

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/beevik/ntp"
)

// query asks addr once with a short timeout.
func query(t *testing.T, addr string) (*ntp.Response, error) {
	t.Helper()
	return ntp.QueryWithOptions(addr, ntp.QueryOptions{Timeout: time.Second})
}

// requireOffset fails unless resp validates and its ClockOffset (what to add
// to the local clock to get the server's time) is within tol of want.
func requireOffset(t *testing.T, resp *ntp.Response, want, tol time.Duration) {
	t.Helper()
	if err := resp.Validate(); err != nil {
		t.Fatalf("Validate: %v (stratum %d)", err, resp.Stratum)
	}
	if d := resp.ClockOffset - want; d < -tol || d > tol {
		t.Fatalf("ClockOffset = %v, want %v ± %v (RTT %v)", resp.ClockOffset, want, tol, resp.RTT)
	}
	t.Logf("ClockOffset = %v (want %v ± %v), RTT %v, stratum %d", resp.ClockOffset, want, tol, resp.RTT, resp.Stratum)
}

func TestFakeServerOffset(t *testing.T) {
	f := StartFake(t)
	for _, tc := range []struct {
		name   string
		offset time.Duration
	}{
		{"ahead 3s", 3 * time.Second},
		{"behind 3s", -3 * time.Second},
		{"zero", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.SetOffset(tc.offset)
			before := f.Requests()
			resp, err := query(t, f.Addr())
			if err != nil {
				t.Fatalf("query %s: %v", f.Addr(), err)
			}
			requireOffset(t, resp, tc.offset, 20*time.Millisecond)
			if got := f.Requests() - before; got != 1 {
				t.Errorf("Requests grew by %d, want 1", got)
			}
		})
	}
}

func TestFakeServerStratum16FailsValidate(t *testing.T) {
	f := StartFake(t)
	f.SetStratum(16)
	resp, err := query(t, f.Addr())
	if err != nil {
		t.Fatalf("query %s: %v", f.Addr(), err)
	}
	if err := resp.Validate(); !errors.Is(err, ntp.ErrInvalidStratum) {
		t.Fatalf("Validate = %v, want %v", err, ntp.ErrInvalidStratum)
	}
}

func TestFakeServerSilentTimesOut(t *testing.T) {
	f := StartFake(t)
	f.SetSilent(true)
	start := time.Now()
	_, err := ntp.QueryWithOptions(f.Addr(), ntp.QueryOptions{Timeout: 300 * time.Millisecond})
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("query of a silent server: err = %v, want a timeout", err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("timed out after %v, expected about 300ms", el)
	}
	if n := f.Requests(); n != 0 {
		t.Fatalf("Requests = %d, want 0 while silent", n)
	}
	f.SetSilent(false)
	if _, err := query(t, f.Addr()); err != nil {
		t.Fatalf("query after SetSilent(false): %v", err)
	}
}

func TestFakeServerEchoesVersion(t *testing.T) {
	f := StartFake(t)
	for _, v := range []int{3, 4} {
		resp, err := ntp.QueryWithOptions(f.Addr(), ntp.QueryOptions{Timeout: time.Second, Version: v})
		if err != nil {
			t.Fatalf("query v%d: %v", v, err)
		}
		if resp.Version != v {
			t.Errorf("reply version = %d, want %d", resp.Version, v)
		}
	}
}

func TestIntegration_Chrony(t *testing.T) {
	c := StartChrony(t, "")
	resp, err := query(t, c.Addr())
	if err != nil {
		t.Fatalf("query chronyd at %s: %v", c.Addr(), err)
	}
	requireOffset(t, resp, 0, 100*time.Millisecond)
}

// TestIntegration_ChronyFaketime: chronyd's clock runs 3s behind ours, so the
// offset to add to our clock to get the server's time is about -3s.
func TestIntegration_ChronyFaketime(t *testing.T) {
	c := StartChrony(t, "-3s")
	resp, err := query(t, c.Addr())
	if err != nil {
		t.Fatalf("query chronyd (faketime -3s) at %s: %v", c.Addr(), err)
	}
	requireOffset(t, resp, -3*time.Second, 300*time.Millisecond)
}
