package pipeline

// bufPool keeps up to n copy buffers for reuse, so steady traffic of
// similar snapshots does not allocate (and zero) a snapshot-sized buffer
// each time. It holds at most n buffers, each as large as the largest
// snapshot seen, i.e. ≤ n × the budget's largest snapshot.
type bufPool struct{ free chan []byte }

func newBufPool(n int) *bufPool { return &bufPool{free: make(chan []byte, n)} }

// get returns a buffer of exactly size bytes (64-bit sizes; the receiver
// refused anything larger than the budget before it got here).
func (b *bufPool) get(size int64) []byte {
	select {
	case buf := <-b.free:
		if int64(cap(buf)) >= size {
			return buf[:size]
		}
		// Too small: drop it, so the pool holds one large buffer rather
		// than this one plus a larger one.
	default:
	}
	return make([]byte, size)
}

func (b *bufPool) put(buf []byte) {
	select {
	case b.free <- buf[:0]:
	default:
	}
}
