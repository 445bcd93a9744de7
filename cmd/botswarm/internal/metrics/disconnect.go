package metrics

// Cause is why a session the bot meant to keep ended: the report splits
// unexpected disconnects by it.
type Cause uint8

// Causes, as the server's Disconnect reason or the session's own timeout
// tells them.
const (
	CauseOther      Cause = iota // a protocol error, an unknown reason
	CauseShutdown                // the server said ServerShutdown
	CauseKicked                  // the server said Kicked
	CauseTimeout                 // silence for the token's timeout, or the server said Timeout
	CauseSuperseded              // the server said Duplicate: a newer session took the player id
)

func (c Cause) String() string {
	switch c {
	case CauseShutdown:
		return "server shutdown"
	case CauseKicked:
		return "kicked"
	case CauseTimeout:
		return "timeout"
	case CauseSuperseded:
		return "superseded"
	}
	return "other"
}

// Disconnected counts one unexpected disconnect with its cause: the five
// causes always sum to Disconnects.
func (c *Counters) Disconnected(cause Cause) {
	c.Disconnects++
	switch cause {
	case CauseShutdown:
		c.DisconnectsShutdown++
	case CauseKicked:
		c.DisconnectsKicked++
	case CauseTimeout:
		c.DisconnectsTimeout++
	case CauseSuperseded:
		c.DisconnectsSuperseded++
	default:
		c.DisconnectsOther++
	}
}
