package segment

// Crash stops the service the way kill -9 would: loaders stop, nothing is
// written, nothing returned. Tests only.
func (s *Service) Crash() { s.halt() }

// Stalls counts the Takes that had to wait for a load or a mark.
func (s *Service) Stalls() int64 { return s.stalls.Load() }
