package conn

import "github.com/ghostwire/ghostwire/actors/msg"

// tickMsgs are a zone tick's messages to c: its Control, carrying the
// view's nudge (msg.Join.ViewWithControl).
func tickMsgs(dst []any, c *Conn, tick uint64, nudge bool) []any {
	m := msg.NewControl()
	m.Player, m.Tick, m.View = c.player, tick, nudge
	return append(dst, m)
}
