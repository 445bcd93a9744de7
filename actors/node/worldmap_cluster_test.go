package node

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/worldmap"
)

// In a cluster each node's map draws every zone with its owner from the
// directory, and the entities of its own zones only: node 1 of three owns
// x0z0, so its frames carry x0z0's NPCs and nothing of the other zones.
func TestWorldMapCluster(t *testing.T) {
	nodes := startCluster(t, 40, nil)
	defer stopAll(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nodes[0].HTTPAddr()+"/map/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := map[string]string{"x0z0": "n1", "x1z0": "n2", "x0z1": "n3", "x1z1": "n3"}
	r := bufio.NewReader(resp.Body)
	var owners map[string]string
	var last worldmap.Frame
	event := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream ended (%v); owners %v, last frame %+v", err, owners, last)
		}
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch event {
		case "zones":
			var z struct {
				Node  string `json:"node"`
				Zones []struct{ ID, Owner string }
			}
			if err := json.Unmarshal([]byte(data), &z); err != nil {
				t.Fatal(err)
			}
			owners = map[string]string{}
			for _, zn := range z.Zones {
				owners[zn.ID] = zn.Owner
			}
		case "frame":
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				t.Fatal(err)
			}
			if last, err = worldmap.Decode(b); err != nil {
				t.Fatal(err)
			}
		}
		if len(owners) == 4 && owners["x1z0"] == want["x1z0"] && owners["x0z1"] == want["x0z1"] && len(last.Loads) == 4 {
			break
		}
	}
	for z, o := range want {
		if owners[z] != o {
			t.Errorf("zone %s drawn as owned by %q, want %q", z, owners[z], o)
		}
	}
	for i, l := range last.Loads {
		if here := i == 0; l.Here != here {
			t.Errorf("zone %d: here=%v, want %v (node 1 runs x0z0 only)", i, l.Here, here)
		}
	}
	for _, e := range last.Entities {
		if e.Zone != 0 {
			t.Fatalf("node 1's frame carries entity %d of zone %d", e.ID, e.Zone)
		}
	}
	if len(last.Entities) != 10 || last.Loads[0].NPCs != 10 {
		t.Errorf("node 1's frame: %d entities, x0z0 has %d NPCs; want x0z0's share of 40 NPCs, 10", len(last.Entities), last.Loads[0].NPCs)
	}
}
