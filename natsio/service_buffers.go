package natsio

// Pools of the buffers a request borrows: the IDs of a batch and the
// body of a reply.

func (s *Service) idBuffer(n int) *[]uint64 {
	if p, ok := s.idBufs.Get().(*[]uint64); ok && cap(*p) >= n {
		return p
	}
	b := make([]uint64, n)
	return &b
}

func (s *Service) replyBuffer() *[]byte {
	if p, ok := s.replyBufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 64)
	return &b
}
