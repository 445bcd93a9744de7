package node

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
)

// keyReloadEvery is how often a node reads its key file again. Kubernetes
// updates a mounted Secret's files within its kubelet's sync period (about
// a minute); ten seconds more is nothing beside a token's lifetime.
const keyReloadEvery = 10 * time.Second

// keyWatch reloads the connect-token keys when the key file changes: a
// rotation's steps (docs/operations.md, Rotating the token key) then need
// no restart. A file that does not read or parse changes nothing — the
// keys in use stay — and is logged once per content (or error).
type keyWatch struct {
	path string
	gw   *gateway.Gateway
	keys func() tokenkey.Keys
	set  func(*tokenkey.Keys)
	log  *slog.Logger

	last    []byte // the content last acted on
	lastErr string // the read error last logged
	stop    chan struct{}
	wg      sync.WaitGroup
}

// watchKeys starts reading path every period; nil when the keys came
// from the environment, which a running process cannot see change.
func watchKeys(g *game, path string, period time.Duration, log *slog.Logger) *keyWatch {
	if g.src == tokenkey.SourceEnv || path == "" {
		return nil
	}
	w := &keyWatch{path: path, gw: g.gw, keys: g.tokenKeys, set: g.keys.Store, log: log, stop: make(chan struct{})}
	// w.last starts empty: the first read compares the file's keys with
	// the ones startGame loaded, so a change in between is not missed.
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.check()
			}
		}
	}()
	return w
}

// check reads the file and, if its keys changed, hands them to the gateway.
func (w *keyWatch) check() {
	b, err := os.ReadFile(w.path)
	if err != nil {
		if err.Error() != w.lastErr {
			w.lastErr = err.Error()
			w.log.Error("token key file unreadable; the keys in use stay", "path", w.path, "err", err)
		}
		return
	}
	w.lastErr = ""
	if bytes.Equal(b, w.last) {
		return
	}
	w.last = b
	ks, err := tokenkey.ParseKeys(b)
	if err != nil {
		w.log.Error("token key file refused; the keys in use stay", "path", w.path, "err", err)
		return
	}
	was := w.keys()
	if slices.Equal(ks, was) {
		return // a comment or the layout changed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.gw.SetKeys(ctx, ks.Mint(), ks[1:]); err != nil {
		w.last = nil // try again next time
		w.log.Error("token keys not reloaded; the keys in use stay", "path", w.path, "err", err)
		return
	}
	w.set(&ks)
	w.log.Info("token keys reloaded", "path", w.path, "token_keys", strings.Join(ks.Fingerprints(), ","),
		"was", strings.Join(was.Fingerprints(), ","))
}

func (w *keyWatch) close() {
	if w == nil {
		return
	}
	close(w.stop)
	w.wg.Wait()
}
