package clock

// Drain takes the value pending on ch, if there is one, without blocking.
// A loop that one of several signals (a tick, a wake-up) can wake drains
// the others after it woke, so that one pass answers every signal pending
// then: select takes a ready case at random, and a signal it left pending
// would start a second pass in some runs and not in others.
func Drain[T any](ch <-chan T) {
	select {
	case <-ch:
	default:
	}
}
