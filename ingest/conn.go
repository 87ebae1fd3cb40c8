package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ConnOptions say how to reach a NATS server and prove who we are. The same
// credentials configure the embedded server, so one set of flags serves
// both sides.
type ConnOptions struct {
	URL      string // nats://host:port[,nats://...]; empty: nats://127.0.0.1:4222
	Name     string // connection name shown in server monitoring
	Token    string
	User     string
	Password string
	// NkeySeedFile holds an nkey user seed (SU...).
	NkeySeedFile string
	// CredsFile is a decentralized-auth JWT + seed file (external servers).
	CredsFile string
	// TLS: CA to verify the server, and an optional client certificate.
	TLSCA, TLSCert, TLSKey string
	// ShmDir, for producers, is the sidecar's shm dir: when no token, user,
	// password, nkey or creds file is given, Connect logs in with the
	// credentials a zero-config sidecar keeps there (LocalAuthFile), and
	// dials the URL written there if URL is empty. No file: no credentials.
	ShmDir string
	// InboxPrefix replaces _INBOX for this connection's reply subjects.
	// Under local trust the sidecar uses one producers may not subscribe
	// to, since notifications it fetches arrive on its inbox.
	InboxPrefix string
	Log         *slog.Logger
}

// DefaultURL is where the embedded server listens by default.
const DefaultURL = "nats://127.0.0.1:4222"

func (o ConnOptions) natsOptions() ([]nats.Option, error) {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		// A sidecar or server restart must not end a producer's session:
		// reconnect forever, and let contexts bound every wait.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.User != "" || o.Password != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.NkeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", o.NkeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if o.CredsFile != "" {
		if _, err := os.Stat(o.CredsFile); err != nil {
			return nil, fmt.Errorf("creds file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("TLS client certificate needs both a cert and a key file")
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts, nil
}

// hasCredentials says whether o proves who we are in any way of its own.
func (o ConnOptions) hasCredentials() bool {
	return o.Token != "" || o.User != "" || o.Password != "" || o.NkeySeedFile != "" || o.CredsFile != ""
}

// Connect dials the server, retrying until ctx ends so that a producer
// started before its sidecar simply waits for it. With ShmDir and no
// credentials of its own it looks for the sidecar's credentials file on
// every attempt, so a sidecar that starts later is found too.
func Connect(ctx context.Context, o ConnOptions) (*nats.Conn, error) {
	delay := 100 * time.Millisecond
	for {
		co, err := o.withLocalCredentials()
		if err != nil {
			return nil, err
		}
		local := !o.hasCredentials() && co.hasCredentials() // logging in with the shm dir's file
		url := co.URL
		if url == "" {
			url = DefaultURL
		}
		var opts []nats.Option
		if local {
			// Asked on every (re)connect: a sidecar restarted with a new
			// password (its file was replaced) is followed without a restart.
			lo := co
			lo.User, lo.Password = "", ""
			opts, err = lo.natsOptions()
			opts = append(opts, nats.UserInfoHandler(localUserInfo(o.ShmDir, co.User, co.Password)))
		} else {
			opts, err = co.natsOptions()
		}
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		// Wrong credentials or TLS setup will not fix themselves.
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "x509") {
			switch {
			case local && errors.Is(err, nats.ErrAuthorization):
				return nil, fmt.Errorf("connect to %s with the credentials in %s: %w (is that file from the sidecar at this address? "+
					"a sidecar writes it at start; other servers need explicit credentials)", redact(url), LocalAuthPath(o.ShmDir), err)
			case o.ShmDir != "" && !o.hasCredentials() && errors.Is(err, nats.ErrAuthorization):
				return nil, fmt.Errorf("connect to %s: %w (no credentials given and no credentials file %s: "+
					"is the sidecar's --shm-dir the same as this producer's?)", redact(url), err, LocalAuthPath(o.ShmDir))
			case !o.hasCredentials() && errors.Is(err, nats.ErrAuthorization):
				return nil, fmt.Errorf("connect to %s: %w (no credentials given: a zero-config sidecar's producers "+
					"find them in its shm dir, ConnOptions.ShmDir; others need a token, user or nkey)", redact(url), err)
			}
			return nil, fmt.Errorf("connect to %s: %w", redact(url), err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w (gave up: %v)", redact(url), err, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// redact hides a password embedded in a URL.
func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "***" + url[i:]
		}
	}
	return url
}

// nkeyPublic derives the public key the server must accept from a seed file.
func nkeyPublic(seedFile string) (string, error) {
	b, err := os.ReadFile(seedFile)
	if err != nil {
		return "", err
	}
	var seed []byte
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "SU") {
			seed = []byte(l)
			break
		}
	}
	if seed == nil {
		return "", fmt.Errorf("%s holds no user nkey seed (a line starting with SU)", seedFile)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}
