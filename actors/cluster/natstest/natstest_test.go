package natstest

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// A started server takes connections and has JetStream; once the test
// shuts it down, connecting fails.
func TestStartServesJetStream(t *testing.T) {
	srv := Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(); err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	nc.Close()
	srv.Shutdown()
	srv.WaitForShutdown()
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected to a server shut down")
	}
}
