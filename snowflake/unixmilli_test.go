package snowflake_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestUnixMilli(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 678_900_000, time.UTC)
	u := snowflake.UnixMilliOf(at)
	if u != 1767366245678 {
		t.Fatalf("UnixMilliOf(%s) = %d, want 1767366245678", at, int64(u))
	}
	if got, want := u.Time(), at.Truncate(time.Millisecond); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Time() = %s, want %s in UTC", got, want)
	}
	if got := u.Add(1500*time.Microsecond + 2*time.Second); got != u+2001 {
		t.Errorf("Add(2.0015s) = %d, want %d (whole milliseconds)", got, u+2001)
	}
	if got := (u + 2001).Sub(u); got != 2001*time.Millisecond {
		t.Errorf("Sub = %s, want 2.001s", got)
	}
	if got := u.Sub(u + 5); got != -5*time.Millisecond {
		t.Errorf("Sub = %s, want -5ms", got)
	}
	if got := snowflake.NoFence.Sub(u); got != math.MaxInt64 {
		t.Errorf("NoFence.Sub = %d, want saturated math.MaxInt64", got)
	}
	if got := snowflake.UnixMilli(math.MinInt64).Sub(1); got != math.MinInt64 {
		t.Errorf("MinInt64.Sub(1) = %d, want saturated math.MinInt64", got)
	}
	if got, want := u.String(), "2026-01-02T15:04:05.678Z (1767366245678)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	b, err := json.Marshal(struct {
		F snowflake.UnixMilli `json:"fence"`
	}{u})
	if err != nil || string(b) != `{"fence":1767366245678}` {
		t.Errorf("json = %s, %v; want the integer", b, err)
	}
	fake := clocktest.NewFake(at)
	if got := snowflake.UnixMilliNow(fake); got != u {
		t.Errorf("UnixMilliNow = %d, want %d", got, u)
	}
}
