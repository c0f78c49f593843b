package clock

import (
	"testing"
	"time"
)

func TestSystemWallAgreesWithTimeNow(t *testing.T) {
	c := NewSystem()
	for range 100 {
		before := time.Now().UnixNano()
		w := c.WallNanos()
		after := time.Now().UnixNano()
		// WallNanos has microsecond precision: it may read up to 1µs below before.
		if w < before-int64(time.Microsecond) || w > after {
			t.Fatalf("WallNanos %d outside [%d, %d]", w, before, after)
		}
	}
}

func TestSystemMonoAdvances(t *testing.T) {
	c := NewSystem()
	a := c.Mono()
	deadline := time.Now().Add(time.Second)
	for c.Mono() == a {
		if time.Now().After(deadline) {
			t.Fatal("Mono did not advance in 1s")
		}
	}
	if c.Mono() < a {
		t.Fatal("Mono went backwards")
	}
}

func BenchmarkSystemWallNanos(b *testing.B) {
	c := NewSystem()
	var sink int64
	for b.Loop() {
		sink += c.WallNanos()
	}
	_ = sink
}

func BenchmarkTimeNowUnixNano(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
	_ = sink
}
