package worldmap

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

//go:embed map.html
var page []byte

// Config configures a Map. Sys, World and Node are required.
type Config struct {
	// Sys is the actor system the zone actors run in: the map asks every
	// zone of the world for its entities by actor name (zone.ActorName),
	// and a zone that runs on another node answers through its cluster
	// proxy without entities.
	Sys *actor.ActorSystem
	// World is the world map.
	World *world.World
	// Node is this node's id (the page's title).
	Node string
	// Owners, when set, returns the zone → owner node directory (the
	// cluster leases); nil: every zone is this node's.
	Owners func() map[string]string
	// Interval is the time between snapshots (default 200 ms: 5 Hz).
	// One snapshot is taken per interval, and only while someone watches,
	// whatever the number of viewers.
	Interval time.Duration
	// MaxViewers bounds the open event streams (default 16); more are
	// refused with 503.
	MaxViewers int
	// Buffer is how many frames may wait for one viewer (default 4). A
	// viewer that falls that far behind is dropped (its stream ends; the
	// browser reconnects), never buffered without bound.
	Buffer int
	// Timeout bounds each zone's answer (default 1 s).
	Timeout time.Duration
	// RTT, when set, returns a connected player's round-trip time (asked
	// only when someone clicks the player: it may cost a look over every
	// session of the node). No address or other identity is shown.
	RTT func(player uint64) (time.Duration, bool)
	// Registerer, when set, gets the map's metrics (ghostwire_worldmap_*).
	Registerer prometheus.Registerer
	// Log receives the rare events; nil discards them.
	Log *slog.Logger
}

// Map serves the live world map: the page, its event stream and entity
// details. Make one with New; Close ends it. Safe for concurrent use.
type Map struct {
	cfg   Config
	names []string // zone ids in map order
	pids  []*actor.PID

	mu      sync.Mutex
	viewers map[*viewer]struct{}
	zones   []byte // the current zones event, as sent
	last    []Entity
	closed  bool

	frames, dropped, refused atomic.Uint64
	frameBytes               atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

type viewer struct {
	ch chan []byte // closed when the viewer is dropped or the map closes
}

// New starts a map's collector (idle until a viewer connects).
func New(cfg Config) (*Map, error) {
	if cfg.Sys == nil || cfg.World == nil {
		return nil, errors.New("worldmap: Config.Sys and Config.World are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.MaxViewers <= 0 {
		cfg.MaxViewers = 16
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Map{cfg: cfg, viewers: map[*viewer]struct{}{}, stop: make(chan struct{})}
	for _, z := range cfg.World.Zones() {
		m.names = append(m.names, z.ID)
		m.pids = append(m.pids, actor.NewPID(cfg.Sys.Address(), zone.ActorName(z.ID)))
	}
	m.zones = m.zonesEvent()
	if cfg.Registerer != nil {
		if err := m.register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	m.wg.Add(1)
	go m.loop()
	return m, nil
}

// Close stops the collector and ends every event stream (so an HTTP
// server's Shutdown is not held up by them).
func (m *Map) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for v := range m.viewers {
		close(v.ch)
		delete(m.viewers, v)
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
}

func (m *Map) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	ents := make([]Entity, 0, 1024)
	enc := NewEncoder(m.cfg.World)
	var seq uint64
	var b64 []byte
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		if m.viewerCount() == 0 {
			continue
		}
		if z := m.zonesEvent(); string(z) != string(m.currentZones()) {
			m.mu.Lock()
			m.zones = z
			m.mu.Unlock()
			m.broadcast(z)
		}
		var loads []ZoneLoad
		ents, loads = m.collect(ents[:0])
		seq++
		frame := enc.Encode(seq, loads, ents)
		m.mu.Lock()
		m.last = append(m.last[:0], ents...) // sorted: the entity endpoint searches it
		m.mu.Unlock()
		// One encoding shared by every viewer: event-stream text is the
		// frame in base64 (about 4/3 of its bytes).
		n := base64.StdEncoding.EncodedLen(len(frame))
		b64 = append(b64[:0], "event: frame\ndata: "...)
		b64 = append(b64, make([]byte, n)...)
		base64.StdEncoding.Encode(b64[len(b64)-n:], frame)
		b64 = append(b64, "\n\n"...)
		m.frameBytes.Store(int64(len(frame)))
		m.frames.Add(1)
		m.broadcast(append([]byte(nil), b64...))
	}
}

// grab is one zone's answer. A zone that answers after its timeout writes
// into a grab nobody reads any more: each request gets its own.
type grab struct {
	ents []Entity
	here bool
}

// collect asks every zone of the world for its owned entities, all at once,
// and waits for them (each within the timeout). Zones on other nodes answer
// through their proxies without running the function: they are not here.
func (m *Map) collect(dst []Entity) ([]Entity, []ZoneLoad) {
	grabs := make([]*grab, len(m.pids))
	futures := make([]*actor.Future, len(m.pids))
	for i, pid := range m.pids {
		g := &grab{}
		grabs[i] = g
		zi := uint16(i)
		futures[i] = zone.RequestInspect(m.cfg.Sys.Root, pid, func(z *sim.Zone) {
			g.here = true
			z.Entities(func(e sim.EntityInfo) {
				if e.Owned {
					g.ents = append(g.ents, Entity{ID: e.ID, Kind: e.Kind, Zone: zi, X: e.State.Pos[0], Z: e.State.Pos[2]})
				}
			})
		}, m.cfg.Timeout)
	}
	loads := make([]ZoneLoad, len(m.pids))
	for i, f := range futures {
		if _, err := msg.Await(f); err != nil {
			continue // timed out or gone: drawn empty this frame
		}
		g := grabs[i]
		loads[i].Here = g.here
		for _, e := range g.ents {
			if e.Kind == sim.KindPlayer {
				loads[i].Players++
			} else {
				loads[i].NPCs++
			}
		}
		dst = append(dst, g.ents...)
	}
	return dst, loads
}

// broadcast queues msg for every viewer; one whose buffer is full is
// dropped.
func (m *Map) broadcast(msg []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for v := range m.viewers {
		select {
		case v.ch <- msg:
		default:
			close(v.ch)
			delete(m.viewers, v)
			m.dropped.Add(1)
			m.cfg.Log.Info("world map viewer dropped: too slow", "buffer", m.cfg.Buffer)
		}
	}
}

func (m *Map) viewerCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.viewers)
}

func (m *Map) currentZones() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.zones
}

// zoneInfo is one zone in the zones event.
type zoneInfo struct {
	ID    string     `json:"id"`
	Rect  [4]float64 `json:"rect"` // min x, min z, max x, max z (metres)
	Owner string     `json:"owner"`
}

// zonesEvent renders the world's zones and their owners as the page's
// "zones" event.
func (m *Map) zonesEvent() []byte {
	var owners map[string]string
	if m.cfg.Owners != nil {
		owners = m.cfg.Owners()
	}
	w := m.cfg.World
	b := w.Bounds()
	ev := struct {
		World  string     `json:"world"`
		Node   string     `json:"node"`
		Bounds [4]float64 `json:"bounds"`
		Zones  []zoneInfo `json:"zones"`
	}{World: w.Name(), Node: m.cfg.Node, Bounds: [4]float64{b.Min[0], b.Min[1], b.Max[0], b.Max[1]}}
	for _, z := range w.Zones() {
		o := m.cfg.Node
		if owners != nil {
			o = owners[z.ID] // "" while nobody holds it
		}
		ev.Zones = append(ev.Zones, zoneInfo{ID: z.ID, Rect: [4]float64{z.Min[0], z.Min[1], z.Max[0], z.Max[1]}, Owner: o})
	}
	j, _ := json.Marshal(ev)
	return []byte("event: zones\ndata: " + string(j) + "\n\n")
}

// ServeHTTP serves GET /map (the page), /map/events (the event stream)
// and /map/entity?id=N (one entity's details, JSON).
func (m *Map) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/map", "/map/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The page loads nothing from anywhere: say so to the browser.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")
		_, _ = w.Write(page)
	case "/map/events":
		m.serveEvents(w, r)
	case "/map/entity":
		m.serveEntity(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (m *Map) serveEvents(w http.ResponseWriter, r *http.Request) {
	v := &viewer{ch: make(chan []byte, m.cfg.Buffer)}
	m.mu.Lock()
	if m.closed || len(m.viewers) >= m.cfg.MaxViewers {
		m.mu.Unlock()
		m.refused.Add(1)
		http.Error(w, "too many world map viewers", http.StatusServiceUnavailable)
		return
	}
	m.viewers[v] = struct{}{}
	zones := m.zones
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.viewers, v) // already gone if dropped or closed
		m.mu.Unlock()
	}()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a reverse proxy must not hold frames back
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		// A viewer whose TCP window stays shut is cut off here rather than
		// holding this goroutine (its queue is already bounded).
		_ = rc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if write([]byte("retry: 2000\n\n")) != nil || write(zones) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-v.ch:
			if !ok {
				return
			}
			if write(b) != nil {
				return
			}
		}
	}
}

// entityInfo is the details the page shows for a clicked dot.
type entityInfo struct {
	ID          uint64     `json:"id"`
	Kind        string     `json:"kind"`
	Zone        string     `json:"zone"`
	Node        string     `json:"node"`
	Pos         [3]float32 `json:"pos"`
	Vel         [3]float32 `json:"vel"`
	Yaw         float32    `json:"yaw"`
	Epoch       uint64     `json:"epoch"`
	Frozen      bool       `json:"frozen"`
	Conn        string     `json:"conn,omitempty"`
	View        int        `json:"view"`
	LastApplied uint64     `json:"last_applied"`
	// RTTMs is the player's smoothed round-trip time (null: not a player
	// connected to this node, or not measured yet).
	RTTMs *float64 `json:"rtt_ms"`
}

// serveEntity answers one entity's details: it looks the entity up in the
// last snapshot (to know its zone) and asks that zone.
func (m *Map) serveEntity(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		http.Error(w, "want ?id=<entity id>", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	zi := -1
	if i, ok := searchID(m.last, id); ok {
		zi = int(m.last[i].Zone)
	}
	m.mu.Unlock()
	if zi < 0 {
		http.Error(w, fmt.Sprintf("entity %d is not on this node's map", id), http.StatusNotFound)
		return
	}
	var info *entityInfo
	f := zone.RequestInspect(m.cfg.Sys.Root, m.pids[zi], func(z *sim.Zone) {
		e, ok := z.Entity(id)
		if !ok || !e.Owned {
			return
		}
		kind := "npc"
		if e.Kind == sim.KindPlayer {
			kind = "player"
		}
		info = &entityInfo{ID: e.ID, Kind: kind, Zone: z.ID(), Node: m.cfg.Node, Pos: e.State.Pos, Vel: e.State.Vel,
			Yaw: e.State.Yaw, Epoch: uint64(e.Epoch), Frozen: e.Frozen, Conn: connName(e.Conn), View: e.View, LastApplied: e.LastApplied}
	}, m.cfg.Timeout)
	if _, err := msg.Await(f); err != nil {
		http.Error(w, "zone did not answer: "+err.Error(), http.StatusGatewayTimeout)
		return
	}
	if info == nil {
		http.Error(w, fmt.Sprintf("entity %d left zone %s", id, m.names[zi]), http.StatusNotFound)
		return
	}
	if info.Kind == "player" && m.cfg.RTT != nil {
		if rtt, ok := m.cfg.RTT(id); ok && rtt > 0 {
			ms := float64(rtt) / float64(time.Millisecond)
			info.RTTMs = &ms
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// connName shortens a connection actor's PID as the zone prints it
// (`Address:"nonhost" Id:"conn$1"`) to its id.
func connName(pid string) string {
	if _, rest, ok := strings.Cut(pid, `Id:"`); ok {
		if id, _, ok := strings.Cut(rest, `"`); ok {
			return id
		}
	}
	return pid
}

// searchID finds id in ents sorted by id.
func searchID(ents []Entity, id uint64) (int, bool) {
	lo, hi := 0, len(ents)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ents[mid].ID < id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(ents) && ents[lo].ID == id
}

func (m *Map) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ghostwire", Subsystem: "worldmap", Name: "viewers",
			Help: "Open world map event streams."}, func() float64 { return float64(m.viewerCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "worldmap", Name: "frames_total",
			Help: "World map snapshots taken and sent (one per interval while someone watches)."}, func() float64 { return float64(m.frames.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ghostwire", Subsystem: "worldmap", Name: "frame_bytes",
			Help: "Size of the last world map frame before base64."}, func() float64 { return float64(m.frameBytes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "worldmap", Name: "viewers_dropped_total",
			Help: "World map viewers dropped because they fell a whole buffer behind."}, func() float64 { return float64(m.dropped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "worldmap", Name: "viewers_refused_total",
			Help: "World map event streams refused: too many viewers."}, func() float64 { return float64(m.refused.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("worldmap metrics: %w", err)
		}
	}
	return nil
}
