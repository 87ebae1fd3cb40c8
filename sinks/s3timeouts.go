package sinks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
)

// Why the S3 client needs its own timeouts: minio-go's default transport
// bounds the wait for response headers (1 min) but not the sending of a
// body, and nothing bounds a request as a whole. A server that dies or
// stops mid-request without closing the connection (a stopped process, a
// dead host behind a load balancer, a half-open TCP connection) leaves a
// part upload blocked on a full socket buffer for good; the create-only
// completion, checksums and retries never get their turn. Three limits
// turn that into an error the retry logic handles, each with a
// configurable default (S3Config):
//
//   - ConnectTimeout bounds the TCP connect and the TLS handshake.
//   - StallTimeout fails a request whose connection moves no byte in
//     either direction for that long: a dead server is noticed in seconds,
//     whatever the size of the part, while a slow but moving transfer is
//     never cut. It is also the longest the server may think before it
//     starts its answer (MinIO sends keep-alive blanks every 10 s while it
//     completes a large multipart upload, so it must stay above that).
//   - RequestTimeout plus 1 s per MiB sent or received (a floor of 1 MiB/s)
//     bounds each HTTP request in all, against a server that trickles.
//
// Each limit applies to one HTTP request: minio-go retries a request that
// timed out (RequestRetries), then the sink's own attempts take over.
const (
	defaultConnectTimeout = 10 * time.Second
	defaultStallTimeout   = 20 * time.Second
	defaultRequestTimeout = time.Minute
	// minRate is the throughput below which a request counts as hung.
	minRate = 1 << 20 // bytes per second
)

// TimeoutError is an S3 request that the client gave up on: its connection
// stalled, or it ran past its deadline. It is transient (Retryable): the
// sink and minio-go retry it.
type TimeoutError struct {
	Method, Host, Path string
	// Stall is true when no byte moved for Limit; false when the request
	// as a whole took longer than Limit.
	Stall bool
	Limit time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Stall {
		return fmt.Sprintf("S3 request %s %s%s stalled: no byte sent or received for %v (s3.stall_timeout): the server is down, stopped or overloaded",
			e.Method, e.Host, e.Path, e.Limit)
	}
	return fmt.Sprintf("S3 request %s %s%s took longer than its deadline of %v (s3.request_timeout plus 1 s per MiB): the server is too slow or stuck",
		e.Method, e.Host, e.Path, e.Limit)
}

// Timeout marks it as a timeout for net.Error-style checks.
func (e *TimeoutError) Timeout() bool { return true }

// newS3Transport is minio-go's default transport with the three limits.
func newS3Transport(cfg S3Config, secure bool, log *slog.Logger) (http.RoundTripper, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, stall: cfg.StallTimeout}, nil
	}
	tr.TLSHandshakeTimeout = cfg.ConnectTimeout
	tr.ResponseHeaderTimeout = cfg.StallTimeout
	// An idle pooled connection keeps the read deadline of its last
	// response; closing it first means a reused connection never fails on
	// a deadline from its idle time.
	tr.IdleConnTimeout = cfg.StallTimeout / 2
	return &deadlineTransport{next: tr, stall: cfg.StallTimeout, base: cfg.RequestTimeout, log: log}, nil
}

// stallConn pushes its deadline forward whenever a byte moves: a write
// (a request going out, whose answer is then due) moves both the read and
// the write deadline, a read that returned data the read deadline.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.Conn.SetDeadline(time.Now().Add(c.stall))
	return c.Conn.Write(p)
}

func (c *stallConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.stall))
	}
	return n, err
}

// deadlineTransport gives every HTTP request its own deadline and turns
// the transport's timeouts into a *TimeoutError, logged when it happens
// (minio-go's own retries are silent).
type deadlineTransport struct {
	next  http.RoundTripper
	stall time.Duration
	base  time.Duration
	log   *slog.Logger
}

var errRequestDeadline = errors.New("S3 request deadline")

func (t *deadlineTransport) limit(bytes int64) time.Duration {
	return t.base + time.Duration(max(bytes, 0))*time.Second/minRate
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancelCause(parent)
	lim := t.limit(req.ContentLength)
	timer := time.AfterFunc(lim, func() { cancel(errRequestDeadline) })
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		err = t.explain(req, parent, ctx, lim, err)
		cancel(nil)
		return nil, err
	}
	// The answer's body gets time for its size from now on.
	if resp.ContentLength > 0 {
		lim = t.limit(resp.ContentLength)
		timer.Reset(lim)
	}
	resp.Body = &deadlineBody{ReadCloser: resp.Body, t: t, req: req, parent: parent, ctx: ctx, lim: lim,
		stop: func() { timer.Stop(); cancel(nil) }}
	return resp, nil
}

// explain replaces a timeout of this transport's own making by a
// *TimeoutError; errors of the caller's context stay what they are, so a
// cancelled Put is not retried.
func (t *deadlineTransport) explain(req *http.Request, parent, ctx context.Context, lim time.Duration, err error) error {
	if err == nil || errors.Is(err, io.EOF) || parent.Err() != nil {
		return err
	}
	te := &TimeoutError{Method: req.Method, Host: req.URL.Host, Path: req.URL.Path}
	var ne net.Error
	var oe *net.OpError
	switch {
	case context.Cause(ctx) == errRequestDeadline:
		te.Limit = lim
	case errors.As(err, &oe) && oe.Op == "dial":
		return err // "dial tcp ...: i/o timeout" says it all
	case errors.As(err, &ne) && ne.Timeout():
		te.Stall, te.Limit = true, t.stall
	default:
		return err
	}
	t.log.Warn("S3 request timed out; it is retried", "method", req.Method, "host", req.URL.Host, "path", req.URL.Path,
		"stalled", te.Stall, "limit", te.Limit, "err", err)
	return te
}

type deadlineBody struct {
	io.ReadCloser
	t           *deadlineTransport
	req         *http.Request
	parent, ctx context.Context
	lim         time.Duration
	stop        func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.t.explain(b.req, b.parent, b.ctx, b.lim, err)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}
