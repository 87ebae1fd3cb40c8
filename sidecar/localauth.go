package sidecar

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/fzsidecar/fzsidecar/ingest"
)

// newLocalAuth prepares the embedded server's local trust when cfg asks for
// it (nil otherwise).
func newLocalAuth(cfg Config, log *slog.Logger) (*ingest.LocalAuth, error) {
	if !cfg.LocalAuth {
		return nil, nil
	}
	if !cfg.Embedded {
		return nil, fmt.Errorf("local credentials need the embedded NATS server")
	}
	local, err := ingest.NewLocalAuth(cfg.Receiver.ShmDir, cfg.Receiver.Subjects, log)
	if err != nil {
		return nil, err
	}
	log.Info("NATS secured for this user: producers log in with the credentials file (no credentials configured)",
		"file", ingest.LocalAuthPath(cfg.Receiver.ShmDir), "uid", os.Geteuid(), "reused", local.Reused)
	return local, nil
}
