package interest

import "github.com/ghostwire/ghostwire/replication/ghost"

// AppendView appends s's members to dst as ghost view entries and returns
// dst: the entity id (ids, by slot), the class for its kind (kinds, by
// slot), its priority and its state (states, by slot). Members whose kind
// has no class are skipped. It allocates only when dst must grow.
func (s *Set) AppendView(dst []ghost.ViewEntry, ids []uint64, kinds []uint8, states []ghost.State, classes *[MaxKinds]*ghost.Class) []ghost.ViewEntry {
	for _, e := range s.cur {
		sl := e.Slot()
		k := kinds[sl]
		if int(k) >= MaxKinds || classes[k] == nil {
			continue
		}
		dst = append(dst, ghost.ViewEntry{Entity: ids[sl], Class: classes[k], Priority: e.Priority, State: states[sl]})
	}
	return dst
}
