package interest

import "github.com/ghostwire/ghostwire/replication/ghost"

// AppendView appends s's members to dst as ghost view entries and returns
// dst: the entity id (ids, by slot), the class for its kind (kinds, by
// slot), its priority (AppendPriorities: call it when that may) and its
// state (states, by slot). Members whose kind has no class are skipped. It
// allocates only when dst or the tracker's priority scratch must grow.
func (t *Tracker) AppendView(dst []ghost.ViewEntry, s *Set, ids []uint64, kinds []uint8, states []ghost.State, classes *[MaxKinds]*ghost.Class) []ghost.ViewEntry {
	t.viewP = t.AppendPriorities(t.viewP[:0], s)
	for i, e := range s.Entries() {
		sl := e.Slot()
		k := kinds[sl]
		if int(k) >= MaxKinds || classes[k] == nil {
			continue
		}
		dst = append(dst, ghost.ViewEntry{Entity: ids[sl], Class: classes[k], Priority: t.viewP[i], State: states[sl]})
	}
	return dst
}
