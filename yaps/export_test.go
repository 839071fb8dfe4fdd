package yaps

// WriteAheads reports how many writes of s took the write-ahead path.
func WriteAheads(s *Service) int64 { return s.writeAheads.Load() }
