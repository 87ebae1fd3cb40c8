package pipeline

import (
	"context"
	"sync"
)

// keyLocks serialises snapshots with the same key. Only the dispatcher
// locks, so a waiter never holds a stage slot that the holder needs.
type keyLocks struct {
	mu   sync.Mutex
	busy map[Key]chan struct{}
}

func newKeyLocks() *keyLocks { return &keyLocks{busy: map[Key]chan struct{}{}} }

// lock waits until no other snapshot with key k is in flight, then claims
// k; the returned function releases it.
func (l *keyLocks) lock(ctx context.Context, k Key) (func(), error) {
	for {
		l.mu.Lock()
		ch, held := l.busy[k]
		if !held {
			ch = make(chan struct{})
			l.busy[k] = ch
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.busy, k)
					l.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
