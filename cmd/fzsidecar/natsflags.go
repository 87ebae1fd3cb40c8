package main

import (
	"flag"
	"os"
	"time"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// natsFlags are the connection and credential flags shared by serve,
// publish and simulate. Secrets can come from the environment
// (FZ_NATS_TOKEN, FZ_NATS_PASSWORD) so they do not show up in ps.
type natsFlags struct {
	url, token, user, password, nkey, creds, tlsCA, tlsCert, tlsKey, prefix string
}

func (n *natsFlags) register(fs *flag.FlagSet, urlHelp string) {
	fs.StringVar(&n.url, "nats-url", "", urlHelp)
	fs.StringVar(&n.token, "nats-token", "", "NATS auth token (default $FZ_NATS_TOKEN)")
	fs.StringVar(&n.user, "nats-user", "", "NATS user name")
	fs.StringVar(&n.password, "nats-password", "", "NATS password (default $FZ_NATS_PASSWORD)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "file holding a NATS nkey user seed (SU...)")
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (JWT + seed, for external servers)")
	fs.StringVar(&n.tlsCA, "tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&n.tlsCert, "tls-cert", "", "TLS certificate file (client cert; for serve also the embedded server's cert)")
	fs.StringVar(&n.tlsKey, "tls-key", "", "TLS key file for --tls-cert")
	fs.StringVar(&n.prefix, "subject-prefix", ingest.DefaultPrefix, "first token of every NATS subject; streams are <PREFIX>_SNAPSHOTS and <PREFIX>_RESULTS")
}

func (n *natsFlags) check(fs *flag.FlagSet) error {
	if !ingest.ValidToken(n.prefix) {
		return usageErr(fs, "--subject-prefix %q: expected 1-128 characters of A-Z a-z 0-9 _ -", n.prefix)
	}
	if (n.tlsCert == "") != (n.tlsKey == "") {
		return usageErr(fs, "--tls-cert and --tls-key go together")
	}
	return nil
}

func (n *natsFlags) conn(name string) ingest.ConnOptions {
	// Secrets from the environment are read here, not as flag defaults,
	// which --help would print.
	if n.token == "" {
		n.token = os.Getenv("FZ_NATS_TOKEN")
	}
	if n.password == "" {
		n.password = os.Getenv("FZ_NATS_PASSWORD")
	}
	return ingest.ConnOptions{URL: n.url, Name: name, Token: n.token, User: n.user, Password: n.password,
		NkeySeedFile: n.nkey, CredsFile: n.creds, TLSCA: n.tlsCA, TLSCert: n.tlsCert, TLSKey: n.tlsKey}
}

func (n *natsFlags) subjects() ingest.Subjects { return ingest.Subjects{Prefix: n.prefix} }

// parseSize accepts plain byte counts and K/M/G/T with optional "i"/"B"
// suffixes; one implementation for every command and the config file.
func parseSize(s string) (int64, error) { return config.ParseSize(s) }

func positiveDuration(fs *flag.FlagSet, name string, d time.Duration) error {
	if d <= 0 {
		return usageErr(fs, "--%s %v: expected a positive duration such as 30s or 5m", name, d)
	}
	return nil
}
