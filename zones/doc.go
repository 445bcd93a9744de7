// Package zones is the game world's pure core: the world map (world), a
// uniform spatial grid (grid), per-player interest and priorities (interest),
// the zone simulation tick (sim) and the two-phase ownership handoff between
// zones (handoff). Nothing below zones/ opens a socket, talks NATS, starts a
// goroutine or reads the clock: time is passed in, so every behaviour is
// reproducible in a test. actors/zone wraps sim in a protoactor actor;
// proto/ carries the handoff, replica and view messages between processes.
//
// See docs/zones.md for the world map format, the tick, interest and
// the handoff message flow.
package zones
