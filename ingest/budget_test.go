package ingest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBudgetFailFast(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, "a", 60, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, "b", 50, false, time.Minute); !errors.Is(err, ErrBudgetFull) {
		t.Fatalf("want budget full, got %v", err)
	}
	if err := b.Acquire(ctx, "a", 60, false, time.Minute); err != nil {
		t.Fatalf("retried admission must be idempotent: %v", err)
	}
	if err := b.Acquire(ctx, "c", 101, true, time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want too large, got %v", err)
	}
	if used, n := b.Used(); used != 60 || n != 1 {
		t.Fatalf("used %d holds %d", used, n)
	}
	b.Release("a")
	if err := b.Acquire(ctx, "b", 50, false, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestBudgetBlockFIFO(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, "a", 100, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	go func() {
		if b.Acquire(ctx, "big", 80, true, time.Minute) == nil {
			order <- "big"
		}
	}()
	waitWaiters(t, b, 1, order) // big queues first (a fixed sleep let small overtake it on a loaded machine)
	go func() {
		if b.Acquire(ctx, "small", 30, true, time.Minute) == nil {
			order <- "small"
		}
	}()
	waitWaiters(t, b, 2, order)
	b.Charge("a", 100)
	b.Release("a")
	if w := nextGrant(t, order); w != "big" {
		t.Fatalf("first grant %s, want big (FIFO)", w)
	}
	select {
	case w := <-order:
		t.Fatalf("%s granted beyond the limit", w)
	case <-time.After(50 * time.Millisecond):
	}
	b.Charge("big", 80)
	b.Release("big")
	if w := nextGrant(t, order); w != "small" {
		t.Fatalf("second grant %s", w)
	}
}

// waitWaiters waits until n requests queue in b, failing if one is
// granted (sent on granted) meanwhile.
func waitWaiters(t *testing.T, b *Budget, n int, granted <-chan string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		b.mu.Lock()
		queued := len(b.waiters)
		b.mu.Unlock()
		if queued == n {
			return
		}
		select {
		case w := <-granted:
			t.Fatalf("%s granted while full", w)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests waiting after 20 s, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextGrant is the next granted request's name; it fails t if none is
// granted within 20 s (instead of hanging the test binary).
func nextGrant(t *testing.T, granted <-chan string) string {
	t.Helper()
	select {
	case w := <-granted:
		return w
	case <-time.After(20 * time.Second):
		t.Fatal("no waiter granted within 20 s of the release")
		return ""
	}
}

func TestBudgetBlockTimeout(t *testing.T) {
	b := NewBudget(10)
	b.Charge("x", 10)
	// start before the deadline is set: a pause in between must not make
	// the measured wait look shorter than the timeout.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := b.Acquire(ctx, "y", 5, true, time.Minute)
	if !errors.Is(err, ErrBudgetFull) {
		t.Fatalf("want budget full after waiting, got %v", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond || d > 2*time.Second {
		t.Fatalf("waited %v", d)
	}
	if used, _ := b.Used(); used != 10 {
		t.Fatalf("timed-out waiter left bytes behind: %d", used)
	}
}

func TestBudgetLeaseExpiry(t *testing.T) {
	b := NewBudget(10)
	now := time.Now()
	b.now = func() time.Time { return now }
	ctx := context.Background()
	if err := b.Acquire(ctx, "dead", 10, false, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, "live", 10, false, time.Second); !errors.Is(err, ErrBudgetFull) {
		t.Fatal("should be full")
	}
	now = now.Add(2 * time.Second) // the producer never published
	if err := b.Acquire(ctx, "live", 10, false, time.Second); err != nil {
		t.Fatalf("expired lease not reclaimed: %v", err)
	}
	// Once charged (notification arrived), a hold never expires and cannot
	// be released as a lease.
	b.Charge("live", 8)
	now = now.Add(time.Hour)
	b.ReleaseLease("live")
	if used, _ := b.Used(); used != 8 {
		t.Fatalf("used %d, want 8", used)
	}
	b.Release("live")
	if used, n := b.Used(); used != 0 || n != 0 {
		t.Fatalf("used %d holds %d", used, n)
	}
}
