package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options are a test server's: JetStream on a random loopback port, its
// store in a new tb.TempDir, no signal handlers, no log. Callers may
// change them before Run (a fixed port and store to restart a server in
// place, the embedded node's limits).
func Options(tb testing.TB) *server.Options {
	tb.Helper()
	return &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: tb.TempDir(), NoSigs: true, NoLog: true}
}

// Run starts a server with opts and returns once it takes connections
// (within 10 s, else the test fails). The caller shuts it down.
func Run(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		tb.Fatal("nats-server not ready")
	}
	return srv
}

// Start runs a server with Options, shut down (and waited for) when the
// test ends; a test may shut it down sooner, to see NATS gone.
func Start(tb testing.TB) *server.Server {
	tb.Helper()
	srv := Run(tb, Options(tb))
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}
