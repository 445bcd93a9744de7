package msg

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// ConnName is PID.String's text, but for the spaces between fields
// (protobuf's text form adds a second one at random, per binary, so that
// no one depends on it): the zones' names for connections read the same
// whichever made them.
func TestConnNameIsThePIDsText(t *testing.T) {
	oneSpace := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, p := range []*actor.PID{
		{Address: "nonhost", Id: "conn$7"},
		{Address: "127.0.0.1:4222", Id: "link-n2", RequestId: 5},
		{Address: "10.0.0.1:1", Id: "link-k3", RequestId: 4294967295},
		{Address: "", Id: "x"},
		{Address: "nonhost", RequestId: 3},
		{},
		{Address: `a"b\c`, Id: "tab\there"},
	} {
		if got, want := ConnName(p), oneSpace(p.String()); got != want {
			t.Errorf("ConnName(%v) = %q, want %q", p, got, want)
		}
	}
	if got := ConnName(nil); got != "" {
		t.Errorf("ConnName(nil) = %q, want empty", got)
	}
}

// BenchmarkConnName against PID.String, which it replaces where a zone
// names a connection.
func BenchmarkConnName(b *testing.B) {
	p := &actor.PID{Address: "127.0.0.1:4222", Id: "link-n2", RequestId: 5}
	b.Run("ConnName", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ConnName(p)
		}
	})
	b.Run("PID.String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.String()
		}
	})
}
