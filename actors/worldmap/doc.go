// Package worldmap serves zoned's live world map: a self-contained web page
// (GET /map, embedded, no external assets) that draws the world's zones with
// their owner node and load, and every player and NPC the node's zones own
// as dots, updated about five times a second over server-sent events
// (GET /map/events); a click on a dot fetches its details (GET /map/entity).
//
// Cost stays flat in the number of viewers: while at least one watches, a
// single collector takes one snapshot per interval — a zone.Inspect sent to
// every zone actor at once, copying positions inside the zone's mailbox —
// encodes it once (Encoder: sorted, delta-coded ids and 16-bit positions,
// about 7 bytes an entity) and hands the same bytes to every viewer. Each
// viewer has a small bounded queue; one that falls a whole queue behind is
// dropped (the browser reconnects), never buffered. Viewers are capped.
//
// In a cluster each node's map shows its own zones' entities and the
// directory's owner of every zone; a zone on another node answers the
// Inspect through its cluster proxy without entities, and is drawn with its
// owner only. The map is read-only and served on the HTTP address only.
package worldmap
