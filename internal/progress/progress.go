// Package progress draws a one-line progress bar on a terminal. On anything
// that is not a terminal it draws nothing, so logs and pipes stay clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Bar is safe for concurrent Add calls.
type Bar struct {
	w      io.Writer
	label  string
	total  int64
	done   atomic.Int64
	start  time.Time
	mu     sync.Mutex
	last   time.Time
	active bool
	closed bool
}

// New returns a bar for total units (bytes) that draws on w only when w is a
// terminal. A nil *Bar is valid and does nothing.
func New(w io.Writer, label string, total int64) *Bar {
	f, ok := w.(*os.File)
	active := ok && term.IsTerminal(int(f.Fd()))
	return &Bar{w: w, label: label, total: total, start: time.Now(), active: active}
}

// Add records n more units done.
func (b *Bar) Add(n int64) {
	if b == nil {
		return
	}
	d := b.done.Add(n)
	if !b.active {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || (time.Since(b.last) < 100*time.Millisecond && d < b.total) {
		return
	}
	b.last = time.Now()
	b.draw(d)
}

func (b *Bar) draw(d int64) {
	frac := 1.0
	if b.total > 0 {
		frac = float64(d) / float64(b.total)
	}
	if frac > 1 {
		frac = 1
	}
	const width = 30
	n := int(frac * width)
	bar := make([]byte, width)
	for i := range bar {
		if i < n {
			bar[i] = '='
		} else {
			bar[i] = ' '
		}
	}
	el := time.Since(b.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(d) / el / 1e6
	}
	fmt.Fprintf(b.w, "\r%s [%s] %5.1f%% %8.1f MB/s", b.label, bar, frac*100, rate)
}

// Done draws the final state and ends the line.
func (b *Bar) Done() {
	if b == nil || !b.active {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.draw(b.done.Load())
	fmt.Fprintln(b.w)
}
