package handshake

import (
	"reflect"
	"testing"
)

// The data word prefetchAEAD reads is the AEAD's own allocation (the
// pointer reflect finds in the interface), for both directions of both
// ends; and prefetching changes neither AEAD: packets sealed after it
// open on the other end, both ways.
func TestPrefetchAEADFindsTheKey(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 21)
	for _, s := range []*Session{cs, ss} {
		if got, want := uintptr(aeadData(&s.recv)), reflect.ValueOf(s.recv).Pointer(); got != want || got == 0 {
			t.Fatalf("receiving AEAD: data word %#x, reflect %#x", got, want)
		}
		if got, want := uintptr(aeadData(&s.send.aead)), reflect.ValueOf(s.send.aead).Pointer(); got != want || got == 0 {
			t.Fatalf("sending AEAD: data word %#x, reflect %#x", got, want)
		}
		if aeadData(&s.recv) == aeadData(&s.send.aead) {
			t.Fatal("one AEAD for both directions")
		}
		s.PrefetchSealKey()
		s.PrefetchSession()
		s.PrefetchOpenKey()
	}
	exchange(t, cs, ss, testClient)
}
