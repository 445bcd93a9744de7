package worldmap

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/world"
)

// remoteZones starts an actor system where every zone of w is answered the
// way a cluster proxy answers a zone of another node: Inspect responded
// without running (so the map's frames carry no entities). The browser
// test in actors/node covers zones with entities.
func remoteZones(t *testing.T, w *world.World) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem()
	for _, z := range w.Zones() {
		_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*zone.Inspect); ok {
				c.Respond(struct{}{})
			}
		}), zone.ActorName(z.ID))
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(sys.Shutdown)
	return sys
}

func newMap(t *testing.T, cfg Config) (*Map, *httptest.Server) {
	t.Helper()
	cfg.World = world.Default()
	cfg.Sys = remoteZones(t, cfg.World)
	cfg.Node = "n1"
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(func() {
		m.Close()
		srv.Close()
	})
	return m, srv
}

// readEvent returns the next event's name from an event stream.
func readEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	name := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if line == "" && name != "" {
			return name
		}
	}
}

// A viewer gets the zones, then frames, one per interval.
func TestEventStream(t *testing.T) {
	_, srv := newMap(t, Config{})
	resp, err := http.Get(srv.URL + "/map/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	if ev := readEvent(t, r); ev != "zones" {
		t.Fatalf("first event %q, want zones", ev)
	}
	for range 3 {
		if ev := readEvent(t, r); ev != "frame" {
			t.Fatalf("event %q, want frame", ev)
		}
	}
}

// The policy when a viewer falls behind: once its queue is full it is
// dropped (its stream closed), never buffered further; others are not.
func TestSlowViewerDropped(t *testing.T) {
	m, _ := newMap(t, Config{Buffer: 2, Interval: time.Hour})
	slow, fast := &viewer{ch: make(chan []byte, 2)}, &viewer{ch: make(chan []byte, 2)}
	m.mu.Lock()
	m.viewers[slow], m.viewers[fast] = struct{}{}, struct{}{}
	m.mu.Unlock()
	for i := range 3 {
		m.broadcast([]byte("frame"))
		<-fast.ch // the fast one keeps up
		if i < 2 && m.dropped.Load() != 0 {
			t.Fatalf("dropped after %d frames, within the buffer", i+1)
		}
	}
	if m.dropped.Load() != 1 || m.viewerCount() != 1 {
		t.Fatalf("dropped %d, viewers %d: want the slow one dropped, the fast one kept", m.dropped.Load(), m.viewerCount())
	}
	for range 2 {
		<-slow.ch
	}
	if _, ok := <-slow.ch; ok {
		t.Fatal("the dropped viewer's queue is still open")
	}
}

func TestViewersBounded(t *testing.T) {
	m, srv := newMap(t, Config{MaxViewers: 1})
	first, err := http.Get(srv.URL + "/map/events")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	readEvent(t, bufio.NewReader(first.Body))
	second, err := http.Get(srv.URL + "/map/events")
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable || m.refused.Load() != 1 {
		t.Fatalf("second viewer: %s (refused %d), want 503", second.Status, m.refused.Load())
	}
}

// Close ends open streams at once (an HTTP server's graceful shutdown
// waits for them) and leaves nothing running.
func TestCloseEndsStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	m, srv := newMap(t, Config{})
	resp, err := http.Get(srv.URL + "/map/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	readEvent(t, r)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, r); done <- err }()
	m.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open 5 s after Close")
	}
	srv.Close()
}

func TestReadOnlyAndRoutes(t *testing.T) {
	_, srv := newMap(t, Config{})
	for _, c := range []struct {
		name, method, path string
		code               int
		body               string
	}{
		{"page", "GET", "/map", 200, "<canvas"},
		{"post refused", "POST", "/map", 405, ""},
		{"unknown entity", "GET", "/map/entity?id=12", 404, "not on this node's map"},
		{"malformed entity id", "GET", "/map/entity?id=x", 400, "want ?id="},
		{"elsewhere", "GET", "/map/nope", 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code || !strings.Contains(string(b), c.body) {
				t.Fatalf("%s %s = %d %q", c.method, c.path, resp.StatusCode, b)
			}
		})
	}
}

// The page loads nothing from elsewhere: no URL with a scheme or host.
func TestPageSelfContained(t *testing.T) {
	for _, bad := range []string{"http://", "https://", "//cdn", "src=\"http", "@import"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("map.html references %q: the page must work offline", bad)
		}
	}
}
