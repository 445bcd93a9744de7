package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestKeysNeverShort: a listing cut short by its context is an error,
// never a shorter list. nats.go's KeyValue.Keys, cut partway, returns the
// keys delivered so far with no error, or ErrNoKeysFound for a bucket of
// thousands (3,647 of 5,000 and "no keys found" seen here with 2–20 ms
// deadlines). Deadlines swept from 100 µs to 50 ms land before, during
// and after the listing; every answer must be an error or all the keys.
// An empty bucket is an empty list, not an error.
func TestKeysNeverShort(t *testing.T) {
	nc := natsServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := Keys(ctx, kv); err != nil || len(keys) != 0 {
		t.Fatalf("empty bucket: %v, %v; want no keys, no error", keys, err)
	}
	const n = 5000
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("node-%04d", i)
		if _, err := kv.PutString(ctx, want[i], "record"); err != nil {
			t.Fatal(err)
		}
	}
	cut := 0
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
		5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		for range 3 {
			lctx, lcancel := context.WithTimeout(ctx, d)
			keys, err := Keys(lctx, kv)
			lcancel()
			if err != nil {
				cut++
				continue
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("deadline %v: %d keys and no error, want all %d or an error", d, len(keys), n)
			}
		}
	}
	if cut == 0 {
		t.Fatal("no listing was cut short, not even at 100 µs")
	}
	if keys, err := Keys(ctx, kv); err != nil || !slices.Equal(keys, want) {
		t.Fatalf("with time to finish: %d keys, %v; want all %d", len(keys), err, n)
	}
}
