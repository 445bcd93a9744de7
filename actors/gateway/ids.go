package gateway

import (
	"encoding/binary"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// idTable maps a connection id to its route: the long-form (routed)
// packets' and Disconnects' lookup, and the router's list of its
// connections (all, len). A ConnID is one word, so it is a wordTable:
// router.lookup of a long-form packet 141 → 81 instructions with the
// runtime's map's call (mapaccess1_fast64, memhash64), D1 read misses
// 1.86 → 1.13 (BenchmarkReaderRouteColdRouted). The server draws ids at
// random, but a lookup's id is anyone's: wordTable's seed keeps a forged
// id's miss about as cheap as a hit.
//
// The zero idTable is not ready: use newIDTable. Not safe for concurrent
// use; the router's mu guards it.
type idTable struct{ wordTable }

// A ConnID must be one word.
var _ = [1]struct{}{}[handshake.ConnIDSize-8]

func newIDTable() idTable { return idTable{newWordTable()} }

// idKey is id as a word (the key never leaves the process, so its byte
// order is free): one load in place where the architecture allows an
// unaligned one (unalignedWordsOK), where binary.LittleEndian's put get
// over the inlining budget (82 > 80); assembled from its bytes elsewhere.
func idKey(id handshake.ConnID) uint64 {
	if !unalignedWordsOK { // a byte array need not sit on a word's boundary
		return binary.LittleEndian.Uint64(id[:])
	}
	return *(*uint64)(unsafe.Pointer(&id))
}

func (t *idTable) get(id handshake.ConnID) *route     { return t.wordTable.get(idKey(id)) }
func (t *idTable) set(id handshake.ConnID, rt *route) { t.wordTable.set(idKey(id), rt) }
func (t *idTable) del(id handshake.ConnID)            { t.wordTable.del(idKey(id)) }
func (t *idTable) len() int                           { return t.n }
