package node

import (
	"net/http"
	"time"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/worldmap"
)

// routeMap serves the live world map on the HTTP mux: /map and its event
// stream, and / redirects there. Until the game runs (HTTP starts first)
// it answers 503.
func (n *Node) routeMap(mux *http.ServeMux) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := n.wmap.Load()
		if m == nil || !n.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		m.ServeHTTP(w, r)
	})
	mux.Handle("GET /map", h)
	mux.Handle("GET /map/", h)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/map", http.StatusFound)
	})
}

// startMap makes the world map over the running game (HTTP on only).
func (n *Node) startMap() error {
	if n.httpLn == nil {
		return nil
	}
	m, err := worldmap.New(worldmap.Config{
		Sys: n.game.sys, World: n.game.zones.Map(), Node: n.node, Registerer: n.reg,
		Log: n.log.With("component", "worldmap"), RTT: n.playerRTT,
		Owners: func() map[string]string {
			out := map[string]string{}
			for z, o := range n.leases.Owners() {
				out[z] = o.Node
			}
			return out
		},
	})
	if err != nil {
		return err
	}
	n.wmap.Store(m)
	return nil
}

// playerRTT asks the connection of player (if it is connected here) for
// its smoothed round-trip time.
func (n *Node) playerRTT(player uint64) (time.Duration, bool) {
	ss, err := n.game.gw.Sessions(time.Second)
	if err != nil {
		return 0, false
	}
	for _, s := range ss {
		if s.Player != player {
			continue
		}
		res, err := msg.Await(n.game.sys.Root.RequestFuture(s.PID, &conn.StatsRequest{}, time.Second))
		if st, ok := res.(*conn.Stats); err == nil && ok {
			return st.Session.RTT, true
		}
		return 0, false
	}
	return 0, false
}

// stopMap ends the map's event streams first, so the HTTP server's
// graceful shutdown is not held up by them.
func (n *Node) stopMap() {
	if m := n.wmap.Load(); m != nil {
		m.Close()
	}
}
