package conformance

import (
	"encoding/binary"
	"fmt"
	"math"
)

type teleportVec struct {
	X       string `json:"x"`
	Z       string `json:"z"`
	Payload string `json:"payload"`
	Valid   bool   `json:"valid"`
	Note    string `json:"note"`
}

var stockSchema = []Field{
	{"vectors.protocol_id", "the stock build's protocol id (§ 9.4): as a decimal u64, and as the 8 bytes at offset 28 of a token header (little-endian)"},
	{"vectors.teleport[]", "dev-game teleport requests (§ 9.3), ordered events on lane 1: x and z as f32bits, the payload bytes, and whether the stock server acts on it"},
	{"vectors.echo", "a lane-0 ordered event and the event the server sends back on lane 0"},
	{"vectors.players[]", "a token's player id, the entity id of its player in other clients' ghost creates, and the player's replicated name (§ 9.1–9.2)"},
	{"vectors.npc_ids[]", "NPC entity ids: 2^63 | (zone index + 1) << 40 | n"},
	{"vectors.bounds", "the fixed ghost bounds and the stock world map (§ 9.4)"},
}

func teleportPayload(magic string, x, z float32) string {
	b := []byte(magic)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(z))
	return hx(b)
}

func stockDoc() (doc, error) {
	var pid [8]byte
	binary.LittleEndian.PutUint64(pid[:], stockProtocolID)
	tps := []teleportVec{
		{f32bits(10.5), f32bits(-3), teleportPayload("TP", 10.5, -3), true, "canonical form, 10 bytes"},
		{f32bits(-999.75), f32bits(250), teleportPayload("GWtp", -999.75, 250), true, "the 12-byte form botswarm sends"},
		{f32bits(5000), f32bits(0), teleportPayload("TP", 5000, 0), true, "outside the world: the server clamps x to 1000"},
		{f32bits(float32(math.NaN())), f32bits(0), teleportPayload("TP", float32(math.NaN()), 0), false, "NaN: counted as malformed and ignored"},
		{f32bits(1), f32bits(2), teleportPayload("TP", 1, 2) + "00", false, "wrong size: ignored"},
		{f32bits(1), f32bits(2), teleportPayload("Tp", 1, 2), false, "wrong magic: ignored"},
	}
	var players []map[string]string
	for _, id := range []uint64{1, 42, 1 << 40} {
		players = append(players, map[string]string{"player_id": u64(id), "entity": u64(id), "name": fmt.Sprintf("p%d", id)})
	}
	var npcs []map[string]string
	for _, c := range [][2]uint64{{0, 1}, {0, 5}, {3, 200}} {
		npcs = append(npcs, map[string]string{"zone_index": u64(c[0]), "n": u64(c[1]), "entity": u64(npcID(c[0], c[1]))})
	}
	return doc{
		Description: "What the stock server (cmd/zoned) puts into the protocol: its protocol id, the dev game's echo and teleport events, entity ids and names, and the fixed bounds.",
		Spec:        "docs/protocol.md § 9",
		Schema:      stockSchema,
		Vectors: map[string]any{
			"protocol_id": map[string]string{"decimal": u64(stockProtocolID), "hex": fmt.Sprintf("%016x", uint64(stockProtocolID)), "token_bytes": hx(pid[:]), "ascii": string(pid[:])},
			"teleport":    tps,
			"echo":        map[string]any{"lane": 0, "sent": hx([]byte("hello")), "echoed": hx([]byte("hello"))},
			"players":     players,
			"npc_ids":     npcs,
			"bounds": map[string]any{
				"ghost": map[string]any{"min": []int{-2000, -256, -2000}, "max": []int{2000, 256, 2000}, "precision": 0.01},
				"world": map[string]any{"x": []int{-1000, 1000}, "z": []int{-1000, 1000}, "zones": "2 × 2 of 1000 m"},
			},
		},
	}, nil
}
