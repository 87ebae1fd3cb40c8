package ingest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// Credentials configure the embedded server and the clients alike.
func TestEmbeddedServerAuth(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	os.WriteFile(seedFile, seed, 0o600)
	cases := []struct {
		name string
		auth ConnOptions
	}{
		{"token", ConnOptions{Token: "s3cret"}},
		{"user", ConnOptions{User: "sim", Password: "pw"}},
		{"nkey", ConnOptions{NkeySeedFile: seedFile}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Auth: c.auth})
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			good := c.auth
			good.URL = ns.ClientURL()
			nc, err := Connect(ctx, good)
			if err != nil {
				t.Fatalf("with credentials: %v", err)
			}
			nc.Close()
			start := time.Now()
			_, err = Connect(ctx, ConnOptions{URL: ns.ClientURL()})
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Fatalf("without credentials: %v", err)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatal("an authorization failure must not be retried until the deadline")
			}
		})
	}
}

func TestEmbeddedServerBadListen(t *testing.T) {
	for _, l := range []string{"nohost", "127.0.0.1:http", "127.0.0.1:70000"} {
		if _, err := StartServer(ServerConfig{Listen: l, StoreDir: t.TempDir()}); err == nil {
			t.Errorf("listen %q accepted", l)
		}
	}
	// Port already taken: a clear error, not a hang.
	ns, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	addr := strings.TrimPrefix(ns.ClientURL(), "nats://")
	start := time.Now()
	_, err = StartServer(ServerConfig{Listen: addr, StoreDir: t.TempDir()})
	if time.Since(start) > 5*time.Second {
		t.Errorf("busy port reported after %v", time.Since(start))
	}
	if err == nil {
		t.Fatal("second server on the same port started")
	}
	t.Log(err)
}
