package clock

import "testing"

func TestDrain(t *testing.T) {
	tests := []struct {
		name    string
		ch      chan int
		pending int // values sent before Drain
		want    int // values left after it
	}{
		{"a pending value is taken", make(chan int, 1), 1, 0},
		{"one value of two is taken", make(chan int, 2), 2, 1},
		{"an empty channel", make(chan int, 1), 0, 0},
		{"an unbuffered channel", make(chan int), 0, 0},
		{"a nil channel", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.pending {
				tc.ch <- i
			}
			Drain(tc.ch) // returns at once in every case (a hang fails the test by its timeout)
			if got := len(tc.ch); got != tc.want {
				t.Errorf("%d values left, want %d", got, tc.want)
			}
		})
	}
}
