package ingest

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// Listen is host:port; the default 127.0.0.1:4222 keeps it off the
	// network (shared memory only works on this node anyway). Port 0 picks
	// a free port.
	Listen string
	// StoreDir holds the JetStream file store; it must survive restarts for
	// queued snapshots to survive them.
	StoreDir string
	// Auth: the same credentials clients use (token, user/password, or the
	// nkey seed whose public key is accepted); TLS cert/key make it TLS-only.
	Auth ConnOptions
	// Local, instead of Auth, gives the server the two users of local trust
	// (NewLocalAuth) and writes the producers' credentials file into the
	// shm dir, before the server accepts connections when the port is known
	// and again with the final URL once it listens.
	Local           *LocalAuth
	TLSCert, TLSKey string
	MaxStoreBytes   int64 // JetStream file store limit; 0: the server's default
	ReadyTimeout    time.Duration
	Log             *slog.Logger
}

// StartServer runs an embedded NATS server with JetStream and waits until it
// accepts connections.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:4222"
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("nats listen address %q: %w (expected host:port, e.g. 127.0.0.1:4222)", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("nats listen address %q: port %q is not a number in 0..65535", listen, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// The server only reports a busy port by never becoming ready; probe
		// first so the user gets the reason at once.
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS cannot listen on %s: %w (another sidecar or NATS server running? use --nats-listen or --nats-url)", listen, err)
		}
		l.Close()
	}
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded NATS needs a store directory for JetStream")
	}
	store, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName:         "fzsidecar",
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           store,
		JetStreamMaxMemory: 64 << 20, // we only use file storage
		JetStreamMaxStore:  cfg.MaxStoreBytes,
		NoSigs:             true, // signals belong to the sidecar, not the server
		Authorization:      cfg.Auth.Token,
		Username:           cfg.Auth.User,
		Password:           cfg.Auth.Password,
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.Local != nil {
		if cfg.Auth.hasCredentials() {
			return nil, fmt.Errorf("embedded NATS: local credentials and explicit credentials exclude each other")
		}
		opts.Users = cfg.Local.Users()
		if port != server.RANDOM_PORT {
			if err := cfg.Local.WriteFile((&url.URL{Scheme: "nats", Host: net.JoinHostPort(host, portStr)}).String()); err != nil {
				return nil, err
			}
		}
	} else if !cfg.Auth.hasCredentials() && !loopbackHost(host) {
		log.Warn("embedded NATS listens on a non-loopback address without authentication: anyone who can reach "+
			listen+" can publish snapshots, read results, forge results and delete the streams; "+
			"configure nats.token, nats.user/nats.password or nats.nkey_file, or listen on 127.0.0.1", "listen", listen)
	}
	if cfg.Auth.NkeySeedFile != "" {
		pub, err := nkeyPublic(cfg.Auth.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS nkey: %w", err)
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, fmt.Errorf("embedded NATS TLS needs both a cert and a key file")
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS TLS: %w", err)
		}
		opts.TLS = true
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	sl := &serverLog{l: log.With("component", "nats-server")}
	if cfg.Local != nil {
		// Hashing would not protect passwords the sidecar itself holds
		// (it logs in with one and writes the other to the file).
		sl.dropWarn = "Plaintext passwords detected"
	}
	ns.SetLoggerV2(sl, false, false, false)
	ns.Start()
	wait := cfg.ReadyTimeout
	if wait == 0 {
		wait = 30 * time.Second
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not become ready on %s within %v (port in use? another sidecar running?)", listen, wait)
	}
	if cfg.Local != nil {
		if err := cfg.Local.WriteFile(ns.ClientURL()); err != nil {
			ns.Shutdown()
			return nil, err
		}
	}
	return ns, nil
}

// loopbackHost says whether a listen host is reachable from this node only.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverLog routes the server's messages into slog. Notices are debug-level:
// the server is chatty at startup and its details rarely matter here.
type serverLog struct {
	l        *slog.Logger
	dropWarn string // a warning that does not apply here (prefix)
}

func (s *serverLog) Noticef(f string, v ...any) { s.l.Debug(fmt.Sprintf(f, v...)) }
func (s *serverLog) Warnf(f string, v ...any) {
	if m := fmt.Sprintf(f, v...); s.dropWarn == "" || !strings.HasPrefix(m, s.dropWarn) {
		s.l.Warn(m)
	}
}
func (s *serverLog) Fatalf(f string, v ...any) { s.l.Error(fmt.Sprintf(f, v...)) }
func (s *serverLog) Errorf(f string, v ...any) { s.l.Error(fmt.Sprintf(f, v...)) }
func (s *serverLog) Debugf(f string, v ...any) {}
func (s *serverLog) Tracef(f string, v ...any) {}
