package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// keyCounts counts the sessions granted by the token key that opened
// their tokens, by key fingerprint, across reloads (SetKeys): a key that
// moves from second to first keeps its count. The gateway actor alone
// changes slot and adds through it; Stats reads ids and byID under mu.
type keyCounts struct {
	mu   sync.Mutex
	ids  []string                  // the keys held, in order: the first mints
	byID map[string]*atomic.Uint64 // each key held since start
	slot [handshake.MaxTokenKeys]*atomic.Uint64
}

// hold makes keys the ones counted: slot i counts handshake.Grant.Key i.
func (k *keyCounts) hold(keys []tokenkey.Key) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = make(map[string]*atomic.Uint64, len(keys))
	}
	k.ids = make([]string, len(keys))
	k.slot = [handshake.MaxTokenKeys]*atomic.Uint64{}
	for i, key := range keys {
		id := tokenkey.Fingerprint(key)
		c := k.byID[id]
		if c == nil {
			c = new(atomic.Uint64)
			k.byID[id] = c
		}
		k.ids[i], k.slot[i] = id, c
	}
}

// granted counts a session whose token opened under key i (the actor's).
func (k *keyCounts) granted(i int) {
	if c := k.slot[i]; c != nil {
		c.Add(1)
	}
}

// snapshot returns the keys held, in order, and each one's count.
func (k *keyCounts) snapshot() ([]string, map[string]uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	counts := make(map[string]uint64, len(k.ids))
	for _, id := range k.ids {
		counts[id] = k.byID[id].Load()
	}
	return slices.Clone(k.ids), counts
}

// setKeysRequest asks the gateway actor to replace its token keys.
type setKeysRequest struct {
	key    tokenkey.Key
	others []tokenkey.Key
}

// SetKeys replaces the token keys while the gateway runs (a key file
// reloaded during a rotation, docs/operations.md): from the next connect
// request on, tokens open under key, then each of others, and the
// Redirect tokens of a drain are sealed with key. Connections already up
// are not touched. Keys that handshake.NewServer would refuse (more than
// tokenkey.MaxKeys, one twice) are an error, and nothing changes. It
// returns once the gateway actor holds the new keys, or when ctx ends.
func (g *Gateway) SetKeys(ctx context.Context, key tokenkey.Key, others []tokenkey.Key) error {
	if err := handshake.CheckKeys(key, others); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	res, err := msg.Await(g.sys.Root.RequestFuture(g.pid, &setKeysRequest{key: key, others: slices.Clone(others)}, timeout))
	if err != nil {
		return fmt.Errorf("gateway: set keys: %w", err)
	}
	if err, _ := res.(error); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// setKeys is SetKeys in the actor: the handshake server's keys, the key
// redirects are sealed with, and the counts' slots, together.
func (r *router) setKeys(m *setKeysRequest) error {
	if err := r.srv.SetKeys(m.key, m.others); err != nil {
		return err
	}
	r.cfg.Key, r.cfg.OtherKeys = m.key, m.others
	r.st.keys.hold(append([]tokenkey.Key{m.key}, m.others...))
	return nil
}
