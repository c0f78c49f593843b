package segment

// Crash stops the service the way kill -9 would: loaders stop, nothing is
// written, nothing returned. Tests only.
func (s *Service) Crash() {
	s.mu.Lock()
	s.closed = true
	bufs := make([]*tagBuf, 0, len(s.tags))
	for _, b := range s.tags {
		bufs = append(bufs, b)
	}
	s.mu.Unlock()
	close(s.stop)
	s.cancel()
	s.wg.Wait()
	for _, b := range bufs {
		b.mu.Lock()
		b.closed = true
		b.broadcastLocked()
		b.mu.Unlock()
	}
}

// Stalls counts the Takes that had to wait for a load or a mark.
func (s *Service) Stalls() int64 { return s.stalls.Load() }
