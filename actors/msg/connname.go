package msg

import (
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
)

// ConnName is the name a zone keeps for a player's connection (sim's
// conn, a checkpoint's Conn): the PID in protobuf's text form,
// `Address:"…" Id:"…"` and ` request_id:N` when it has one, fields at
// their zero value left out — what PID.String gives, with one space
// between fields. PID.String formats by reflection (prototext: 13
// allocations and 0.84 µs a call, BenchmarkConnName; this is 2 and
// 0.23 µs), once for every Join a zone takes and every remote Offer and
// Commit a bridge decodes (BenchmarkHandoffCrossProcess: 174 → 146
// allocations a handoff). Readers (cluster.Bridge.GatewayOfConn) look for
// `Id:"…"`, which either form writes the same.
func ConnName(p *actor.PID) string {
	if p == nil {
		return ""
	}
	b := make([]byte, 0, len(`Address:"" Id:"" request_id:4294967295`)+len(p.Address)+len(p.Id)+4)
	// Fields at their zero value are left out, as protobuf's text leaves
	// them.
	if p.Address != "" {
		b = append(b, `Address:`...)
		b = strconv.AppendQuote(b, p.Address)
	}
	if p.Id != "" {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, `Id:`...)
		b = strconv.AppendQuote(b, p.Id)
	}
	if p.RequestId != 0 {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, `request_id:`...)
		b = strconv.AppendUint(b, uint64(p.RequestId), 10)
	}
	return string(b)
}
