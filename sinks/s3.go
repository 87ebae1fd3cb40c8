package sinks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config holds S3 settings. Each empty field falls back to an environment
// variable, then to a default:
//
//	Endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL   https://s3.amazonaws.com
//	AccessKey    AWS_ACCESS_KEY_ID
//	SecretKey    AWS_SECRET_ACCESS_KEY
//	SessionToken AWS_SESSION_TOKEN
//	Region       AWS_REGION, AWS_DEFAULT_REGION          us-east-1
//
// Credentials are never logged or put in error messages.
type S3Config struct {
	Endpoint     string // URL: scheme picks TLS; e.g. http://127.0.0.1:9000
	AccessKey    string
	SecretKey    string
	SessionToken string
	Region       string

	// PartSize of multipart uploads (default 16 MiB, at least 5 MiB, the
	// S3 minimum). Blobs up to PartSize go in one PUT. Set explicitly
	// because minio-go otherwise sizes parts for a 5 TiB object.
	PartSize uint64
	// Threads is how many parts go up (or ranges come down) at once
	// (default 4).
	Threads uint
	// Attempts is how many times a Put or a ranged read is tried in all
	// before giving up (default 6). minio-go also retries each HTTP request
	// (RequestRetries, default 10) with backoff, which covers short blips;
	// these outer attempts cover a server that stays away for seconds.
	Attempts int
	// RetryBase is the first backoff between attempts, doubling up to 30×
	// (default 500 ms), with jitter.
	RetryBase time.Duration
	// RequestRetries is minio-go's per-request retry count (default 10).
	RequestRetries int

	// ConnectTimeout bounds a TCP connect and TLS handshake (default 10 s).
	ConnectTimeout time.Duration
	// StallTimeout fails a request when no byte moves on its connection
	// for this long, in either direction: how long a server that died or
	// stopped mid-request goes unnoticed, and how long a server may think
	// before answering (default 20 s).
	StallTimeout time.Duration
	// RequestTimeout plus 1 s per MiB of body bounds one HTTP request in
	// all (default 1 min: a 16 MiB part gets 76 s). See s3timeouts.go.
	RequestTimeout time.Duration
}

const (
	minPartSize     = 5 << 20
	defaultPartSize = 16 << 20
)

func (c S3Config) withDefaults() S3Config {
	env := func(v *string, names ...string) {
		for _, n := range names {
			if *v != "" {
				return
			}
			*v = os.Getenv(n)
		}
	}
	env(&c.Endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	env(&c.AccessKey, "AWS_ACCESS_KEY_ID")
	env(&c.SecretKey, "AWS_SECRET_ACCESS_KEY")
	env(&c.SessionToken, "AWS_SESSION_TOKEN")
	env(&c.Region, "AWS_REGION", "AWS_DEFAULT_REGION")
	if c.Endpoint == "" {
		c.Endpoint = "https://s3.amazonaws.com"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.PartSize == 0 {
		c.PartSize = defaultPartSize
	}
	if c.Threads == 0 {
		c.Threads = 4
	}
	if c.Attempts == 0 {
		c.Attempts = 6
	}
	if c.RetryBase == 0 {
		c.RetryBase = 500 * time.Millisecond
	}
	if c.RequestRetries == 0 {
		c.RequestRetries = 10
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = defaultStallTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	return c
}

type s3sink struct {
	cl     *minio.Client
	bucket string
	prefix string // "" or ends in "/"
	cfg    S3Config
	log    *slog.Logger
	max    int64
}

func openS3(ctx context.Context, bucket, prefix string, o options) (Sink, error) {
	if bucket == "" {
		return nil, errors.New("s3 sink URL has no bucket: expected s3://bucket/prefix")
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		for _, seg := range strings.Split(prefix, "/") {
			if err := ValidateName("prefix segment", seg); err != nil {
				return nil, fmt.Errorf("s3 sink URL prefix %q: %w", prefix, err)
			}
		}
		prefix += "/"
	}
	cfg := o.s3.withDefaults()
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("S3 part size %d: expected at least %d (5 MiB, the S3 minimum)", cfg.PartSize, minPartSize)
	}
	if cfg.Attempts < 1 || cfg.RequestRetries < 1 {
		return nil, fmt.Errorf("S3 attempts %d and request retries %d: expected at least 1", cfg.Attempts, cfg.RequestRetries)
	}
	if cfg.ConnectTimeout < 0 || cfg.StallTimeout < 0 || cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("S3 connect timeout %v, stall timeout %v, request timeout %v: expected durations > 0 (0 for the defaults)",
			cfg.ConnectTimeout, cfg.StallTimeout, cfg.RequestTimeout)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("S3 endpoint %q (AWS_ENDPOINT_URL): expected a URL such as https://s3.example.org or http://127.0.0.1:9000", cfg.Endpoint)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("S3 endpoint %q has a path: put the bucket and prefix in the sink URL instead", cfg.Endpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("S3 credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	tr, err := newS3Transport(cfg, u.Scheme == "https", o.log)
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", u.Host, err)
	}
	cl, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:    u.Scheme == "https",
		Region:    cfg.Region,
		Transport: tr,
		// Trailing headers let parts carry their CRC32C, which the server
		// verifies before accepting the part.
		TrailingHeaders: true,
		MaxRetries:      cfg.RequestRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", u.Host, err)
	}
	s := &s3sink{cl: cl, bucket: bucket, prefix: prefix, cfg: cfg, log: o.log, max: o.maxObject}
	ok, err := cl.BucketExists(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("S3 sink %s at %s: checking the bucket: %w", s, u.Host, err)
	}
	if !ok {
		return nil, fmt.Errorf("S3 bucket %q does not exist at %s: create it first (e.g. mc mb)", bucket, u.Host)
	}
	s.log.Debug("opened S3 sink", "sink", s.String(), "endpoint", u.Host, "region", cfg.Region,
		"part_size", cfg.PartSize, "threads", cfg.Threads, "connect_timeout", cfg.ConnectTimeout,
		"stall_timeout", cfg.StallTimeout, "request_timeout", cfg.RequestTimeout)
	return s, nil
}

func (s *s3sink) String() string { return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/") }
func (s *s3sink) Close() error   { return nil }

func (s *s3sink) object(k Key) string { return s.prefix + k.relPath() }

func (s *s3sink) name(obj string) string { return "s3://" + s.bucket + "/" + obj }

func (s *s3sink) Put(ctx context.Context, k Key, blob []byte, m Meta) error {
	m, err := prepare(k, blob, m)
	if err != nil {
		return err
	}
	obj := s.object(k)
	return s.retry(ctx, "put "+s.name(obj), func() error { return s.putOnce(ctx, obj, blob, m) })
}

// putOnce is one attempt. The object is created with If-None-Match: *, so
// neither this attempt nor a duplicate writer can replace an existing object;
// when the key is taken, the recorded checksum and the bytes decide between
// "already done" (say, a previous attempt whose reply was lost) and a
// conflict.
func (s *s3sink) putOnce(ctx context.Context, obj string, blob []byte, m Meta) error {
	if done, err := s.existing(ctx, obj, blob, m); done || err != nil {
		return err
	}
	err := s.write(ctx, obj, blob, m, "")
	if err == nil {
		return nil
	}
	if code := errResp(err).Code; code == "PreconditionFailed" || code == "ConditionalRequestConflict" {
		if done, err := s.existing(ctx, obj, blob, m); done || err != nil {
			return err
		}
	}
	return err
}

// write uploads blob as obj: create-only when match is "" (If-None-Match:
// *), else replacing only the object whose ETag is match (If-Match; a
// missing object is not created).
func (s *s3sink) write(ctx context.Context, obj string, blob []byte, m Meta, match string) error {
	if uint64(len(blob)) <= s.cfg.PartSize {
		return s.putSingle(ctx, obj, blob, m, match)
	}
	return s.putMultipart(ctx, obj, blob, m, match)
}

// condition sets write's precondition on o.
func condition(o *minio.PutObjectOptions, match string) {
	if match == "" {
		o.SetMatchETagExcept("*")
	} else {
		o.SetMatchETag(match)
	}
}

func crc32cHeader(crc uint32) string {
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], crc)
	return base64.StdEncoding.EncodeToString(be[:])
}

func (s *s3sink) putSingle(ctx context.Context, obj string, blob []byte, m Meta, match string) error {
	opts := minio.PutObjectOptions{
		UserMetadata:     m.userMetadata(),
		ContentType:      "application/octet-stream",
		PartSize:         s.cfg.PartSize,
		DisableMultipart: true,
	}
	// The server verifies this CRC32C against the body and keeps it.
	opts.UserMetadata["x-amz-checksum-crc32c"] = crc32cHeader(m.CRC32C)
	condition(&opts, match)
	_, err := s.cl.PutObject(ctx, s.bucket, obj, bytes.NewReader(blob), int64(len(blob)), opts)
	return err
}

// putMultipart uploads blob in PartSize parts, Threads at a time, each with
// its CRC32C (verified by the server per part) and its own retries.
//
// This drives the multipart calls itself (minio.Core) instead of
// Client.PutObject because PutObject sends If-None-Match only when the
// upload starts, not with CompleteMultipartUpload (minio-go v7.4.1 drops
// custom headers there): two writers racing on one key would both pass the
// start check and the second completion would silently replace the first.
// Sending it on completion makes the server refuse the loser.
func (s *s3sink) putMultipart(ctx context.Context, obj string, blob []byte, m Meta, match string) (err error) {
	core := minio.Core{Client: s.cl}
	opts := minio.PutObjectOptions{UserMetadata: m.userMetadata(), ContentType: "application/octet-stream"}
	opts.UserMetadata["x-amz-checksum-algorithm"] = "CRC32C"
	condition(&opts, match)
	id, err := core.NewMultipartUpload(ctx, s.bucket, obj, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Best effort, also after cancellation: parts of an unfinished
			// upload are invisible but take space until the server's
			// stale-upload expiry.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if aerr := core.AbortMultipartUpload(actx, s.bucket, obj, id); aerr != nil {
				s.log.Debug("aborting multipart upload failed", "object", s.name(obj), "err", aerr)
			}
		}
	}()

	psize := int64(s.cfg.PartSize)
	nparts := int((int64(len(blob)) + psize - 1) / psize)
	parts := make([]minio.CompletePart, nparts)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, s.cfg.Threads)
	var wg sync.WaitGroup
	for range s.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				off := int64(i) * psize
				part := blob[off:min(off+psize, int64(len(blob)))]
				crc := crc32cHeader(CRC32C(part))
				what := fmt.Sprintf("upload part %d/%d of %s", i+1, nparts, s.name(obj))
				perr := s.retry(pctx, what, func() error {
					h := http.Header{}
					h.Set("x-amz-checksum-crc32c", crc)
					op, err := core.PutObjectPart(pctx, s.bucket, obj, id, i+1, bytes.NewReader(part), int64(len(part)),
						minio.PutObjectPartOptions{CustomHeader: h})
					if err == nil {
						parts[i] = minio.CompletePart{PartNumber: i + 1, ETag: op.ETag, ChecksumCRC32C: op.ChecksumCRC32C}
					}
					if errResp(err).Code == "NoSuchUpload" {
						return permanent(err)
					}
					return err
				})
				if perr != nil {
					errs <- perr
					cancel()
					return
				}
			}
		}()
	}
feed:
	for i := range nparts {
		select {
		case next <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		if errResp(err).Code == "NoSuchUpload" {
			// The server lost the upload (say, restarted without its
			// state): a plain error, so the Put starts over.
			return fmt.Errorf("multipart upload of %s vanished from the server: %s", s.name(obj), err.Error())
		}
		return err
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	copts := minio.PutObjectOptions{}
	condition(&copts, match)
	_, err = core.CompleteMultipartUpload(ctx, s.bucket, obj, id, parts, copts)
	return err
}

// existing checks whether obj is already stored: done is true when it holds
// the same blob, committed (see below); a *ConflictError when it holds
// another.
func (s *s3sink) existing(ctx context.Context, obj string, blob []byte, m Meta) (done bool, err error) {
	info, err := s.cl.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		if isNoSuchKey(err) {
			return false, nil
		}
		return false, err
	}
	have, err := metaFromUser(info.UserMetadata)
	if err != nil {
		return false, permanent(fmt.Errorf("%s already exists and its metadata is unreadable (%v): refusing to replace it: %w", s.name(obj), err, ErrConflict))
	}
	if have.CRC32C != m.CRC32C || have.Stored != m.Stored || info.Size != int64(m.Stored) {
		return false, &ConflictError{Object: s.name(obj), HaveCRC32C: have.CRC32C, HaveSize: uint64(info.Size), PutCRC32C: m.CRC32C, PutSize: m.Stored}
	}
	// Equal CRC32C and size do not make equal bytes: a container's header
	// and index each end in their own CRC32C, and a CRC run over data
	// followed by its CRC always reaches the same state, so containers that
	// differ only there (fill, bound, mode, range) share the blob's CRC32C.
	// Compare the bytes (only on a taken key: retries, repeats).
	same, err := s.sameBytes(ctx, obj, info.ETag, blob)
	switch {
	case isNoSuchKey(err):
		// Gone between the HEAD and the GET: a remnant of an upload cut
		// off mid-commit, which MinIO dropped once a killed server's drives
		// were back (TestClusterWithFaults: answered as a failed store, the
		// snapshot was lost to its producer). Nothing is stored: create it.
		s.log.Debug("put: object vanished while being compared; creating it", "object", s.name(obj))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s already exists; reading it to compare: %w", s.name(obj), err)
	}
	if !same {
		return false, &ConflictError{Object: s.name(obj), HaveCRC32C: have.CRC32C, HaveSize: uint64(info.Size), PutCRC32C: m.CRC32C, PutSize: m.Stored}
	}
	// An object that answers HEAD and GET is not yet a committed one.
	// MinIO reads from read quorum but commits at write quorum (with 4
	// drives and the default parity, 2 and 3): an upload cut off while its
	// server was committing it (that server killed, or the request's
	// client killed) can leave it on 2 drives, readable, never
	// acknowledged, and lost with one more drive. Answering "already
	// stored" from it lost a snapshot (TestClusterWithFaults). So the same
	// bytes and metadata are written again over exactly this object
	// (If-Match its ETag: nothing else is replaced, a vanished one is not
	// created): "already stored" then rests on a write the server
	// acknowledged, as a fresh Put does. Only taken keys (retries,
	// redeliveries) pay for it.
	switch err := s.write(ctx, obj, blob, have, info.ETag); {
	case err == nil:
	case isNoSuchKey(err):
		// Gone since the HEAD (a remnant MinIO dropped): create it.
		return false, nil
	case errResp(err).Code == "PreconditionFailed":
		// Replaced since the compare: look again on the next attempt.
		return false, fmt.Errorf("%s changed while being rewritten: %s", s.name(obj), err.Error())
	default:
		return false, fmt.Errorf("%s holds the same blob; rewriting it so that it is surely committed: %w", s.name(obj), err)
	}
	s.log.Debug("put: identical blob already stored; rewritten in place", "object", s.name(obj))
	return true, nil
}

// sameBytes reports whether obj (pinned to etag) holds exactly blob,
// streaming it in 1 MiB pieces rather than holding a second copy.
func (s *s3sink) sameBytes(ctx context.Context, obj, etag string, blob []byte) (bool, error) {
	if len(blob) == 0 {
		return true, nil // the caller checked the size
	}
	opts := minio.GetObjectOptions{}
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return false, permanent(err)
		}
	}
	r, err := s.cl.GetObject(ctx, s.bucket, obj, opts)
	if err != nil {
		return false, err
	}
	defer r.Close()
	buf := make([]byte, min(len(blob), 1<<20))
	for off := 0; off < len(blob); {
		n := min(len(buf), len(blob)-off)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return false, err
		}
		if !bytes.Equal(buf[:n], blob[off:off+n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}

// errResp finds the S3 error in err's chain (minio.ToErrorResponse only
// looks at err itself, not at what it wraps).
func errResp(err error) minio.ErrorResponse {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r
	}
	return minio.ToErrorResponse(err)
}

func isNoSuchKey(err error) bool {
	r := errResp(err)
	return r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket"
}

// permanentError marks errors that another attempt cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(err error) error { return permanentError{err} }

func retryable(err error) bool {
	var pe permanentError
	var ce *ConflictError
	var ck *ChecksumError
	var nf *NotFoundError
	switch {
	case errors.As(err, &pe), errors.As(err, &ce), errors.As(err, &ck), errors.As(err, &nf),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	r := errResp(err)
	switch r.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket", "InvalidBucketName",
		"InvalidArgument", "EntityTooLarge", "InvalidRequest", "NotImplemented", "MethodNotAllowed", "NoSuchKey":
		return false
	}
	// Other 4xx answers mean the request itself is wrong, except timeouts
	// and throttling.
	if r.StatusCode >= 400 && r.StatusCode < 500 && r.StatusCode != 408 && r.StatusCode != 429 && r.Code != "" &&
		r.Code != "PreconditionFailed" && r.Code != "ConditionalRequestConflict" {
		return false
	}
	return true
}

// retry runs fn until it succeeds, fails permanently, or runs out of
// attempts, with jittered exponential backoff between attempts.
func (s *s3sink) retry(ctx context.Context, what string, fn func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil {
			if attempt > 1 {
				s.log.Info("S3 operation succeeded after retries", "op", what, "attempts", attempt)
			}
			return nil
		}
		if !retryable(err) {
			var pe permanentError
			if errors.As(err, &pe) {
				err = pe.error
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt >= s.cfg.Attempts {
			// Permanent, so that retries nested in retries (parts in a
			// Put) do not multiply.
			return permanent(fmt.Errorf("%s: gave up after %d attempts: %w", what, attempt, err))
		}
		d := s.cfg.RetryBase << min(attempt-1, 5)
		d = d/2 + rand.N(d/2+1)
		s.log.Warn("S3 operation failed; retrying", "op", what, "attempt", attempt, "backoff", d, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(d):
		}
	}
}

// stat returns meta and the ETag of k's object.
func (s *s3sink) stat(ctx context.Context, k Key) (Meta, string, error) {
	if err := k.Validate(); err != nil {
		return Meta{}, "", err
	}
	obj := s.object(k)
	var info minio.ObjectInfo
	err := s.retry(ctx, "stat "+s.name(obj), func() error {
		var err error
		info, err = s.cl.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
		if err != nil && isNoSuchKey(err) {
			return permanent(err)
		}
		return err
	})
	if err != nil {
		if isNoSuchKey(err) {
			return Meta{}, "", notFound(ctx, s, k)
		}
		return Meta{}, "", err
	}
	m, err := metaFromUser(info.UserMetadata)
	if err != nil {
		return Meta{}, "", fmt.Errorf("%s: %w", s.name(obj), err)
	}
	if info.Size != int64(m.Stored) {
		return m, "", fmt.Errorf("%s is %d bytes but its metadata says %d: %w", s.name(obj), info.Size, m.Stored, ErrChecksum)
	}
	return m, info.ETag, nil
}

func (s *s3sink) Stat(ctx context.Context, k Key) (Meta, error) {
	m, _, err := s.stat(ctx, k)
	return m, err
}

func (s *s3sink) Get(ctx context.Context, k Key) ([]byte, Meta, error) {
	m, etag, err := s.stat(ctx, k)
	if err != nil {
		return nil, m, err
	}
	obj := s.object(k)
	if m.Stored > uint64(s.max) {
		return nil, m, fmt.Errorf("%s is %d bytes, above the %d-byte limit for one object (raise it with WithMaxObjectBytes)", s.name(obj), m.Stored, s.max)
	}
	buf := make([]byte, m.Stored)
	// Large objects come down as parallel ranges of PartSize, which is what
	// makes a restore fast on a high-latency link.
	step := int64(s.cfg.PartSize)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, s.cfg.Threads)
	)
	for off := int64(0); off < int64(len(buf)); off += step {
		n := min(step, int64(len(buf))-off)
		wg.Add(1)
		sem <- struct{}{}
		go func(off, n int64) {
			defer func() { <-sem; wg.Done() }()
			if err := s.readInto(ctx, obj, etag, off, buf[off:off+n]); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}(off, n)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, m, firstErr
	}
	if got := CRC32C(buf); got != m.CRC32C {
		return nil, m, &ChecksumError{Object: s.name(obj), Want: m.CRC32C, Got: got}
	}
	return buf, m, nil
}

// readInto fills dst from obj at off, pinned to etag so that every range of
// one Get comes from the same object.
func (s *s3sink) readInto(ctx context.Context, obj, etag string, off int64, dst []byte) error {
	what := fmt.Sprintf("read %s at %d+%d", s.name(obj), off, len(dst))
	return s.retry(ctx, what, func() error {
		if len(dst) == 0 {
			return nil
		}
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(off, off+int64(len(dst))-1); err != nil {
			return permanent(err)
		}
		if etag != "" {
			if err := opts.SetMatchETag(etag); err != nil {
				return permanent(err)
			}
		}
		r, err := s.cl.GetObject(ctx, s.bucket, obj, opts)
		if err != nil {
			return err
		}
		defer r.Close()
		if _, err := io.ReadFull(r, dst); err != nil {
			if r := errResp(err); r.Code == "PreconditionFailed" {
				return permanent(fmt.Errorf("object changed while being read: %w", err))
			}
			return err
		}
		return nil
	})
}

func (s *s3sink) ReadRange(ctx context.Context, k Key, off, n int64) ([]byte, error) {
	m, etag, err := s.stat(ctx, k)
	if err != nil {
		return nil, err
	}
	obj := s.object(k)
	if err := checkRange(s.name(obj), off, n, int64(m.Stored), s.max); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if err := s.readInto(ctx, obj, etag, off, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func (s *s3sink) List(ctx context.Context, f Filter) ([]Entry, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	lp := s.prefix
	if f.Run != "" {
		lp += f.Run + "/"
		if f.Var != "" {
			lp += f.Var + "/"
		}
	}
	var out []Entry
	var needStat []int
	err := s.retry(ctx, "list "+s.name(lp), func() error {
		out, needStat = out[:0], needStat[:0]
		// WithMetadata is a MinIO extension that returns user metadata in
		// the listing; other servers leave it empty and we HEAD instead.
		for oi := range s.cl.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: lp, Recursive: true, WithMetadata: true}) {
			if oi.Err != nil {
				return oi.Err
			}
			k, ok := parseRel(strings.TrimPrefix(oi.Key, s.prefix))
			if !ok {
				continue
			}
			e := Entry{Key: k}
			m, err := metaFromUser(oi.UserMetadataStripped)
			if err != nil || m.Stored != uint64(oi.Size) {
				needStat = append(needStat, len(out))
			}
			e.Meta = m
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(needStat) > 0 {
		drop, err := s.statAll(ctx, out, needStat)
		if err != nil {
			return nil, err
		}
		kept := out[:0]
		for i, e := range out {
			if !drop[i] {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	sortEntries(out)
	return out, nil
}

// statAll fills out[i].Meta for each i in idx with HEAD requests, Threads at
// a time. Objects whose metadata is unreadable are zeroed and logged: one bad
// object must not hide the rest of the catalog.
func (s *s3sink) statAll(ctx context.Context, out []Entry, idx []int) (drop []bool, err error) {
	drop = make([]bool, len(out))
	sem := make(chan struct{}, s.cfg.Threads)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, i := range idx {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			obj := s.object(out[i].Key)
			info, err := s.cl.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
			if err == nil {
				var m Meta
				m, err = metaFromUser(info.UserMetadata)
				if err == nil {
					out[i].Meta = m
					return
				}
				s.log.Warn("list: skipping object with unreadable metadata", "object", s.name(obj), "err", err)
				drop[i] = true
				return
			}
			if isNoSuchKey(err) { // deleted since the listing
				drop[i] = true
				return
			}
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("list: stat %s: %w", s.name(obj), err)
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return drop, firstErr
}
