package ghost

import "testing"

// TestSealCopiesRefusesCarryOfUnaccepted: a carry of an entry the
// previous snapshot left empty or refused panics, as one without a
// previous snapshot does (SealCopies checks it where carry reads the
// entry, not in a pass of its own before Seal).
func TestSealCopiesRefusesCarryOfUnaccepted(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	good, bad := State{Health: 1}, State{Health: 1, Pos: [3]float64{1e12, 0, 0}}
	for _, tc := range []struct {
		name string
		prev func(s *Snapshot) // entry 1 of the previous snapshot
	}{
		{name: "empty", prev: func(s *Snapshot) {}},
		{name: "refused", prev: func(s *Snapshot) { s.Set(1, 2, pc, &bad) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := writerFor(t, reg)
			s := w.Next(2)
			s.Set(0, 1, pc, &good)
			tc.prev(s)
			w.Seal(s)
			if w.CanCarry(1, 2, pc, good.Name) {
				t.Fatal("CanCarry of an entry not accepted")
			}
			s = w.Next(2)
			s.Set(0, 1, pc, &good)
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			w.SealCopies(s, []EntryCopy{{Dst: 1, Src: Carry}})
		})
	}
}

// TestSealCopiesValidity: a snapshot sealed with copies is valid exactly
// when every entry, the copies' included, is set and accepted (SealCopies
// counts, Seal skips the destinations).
func TestSealCopiesValidity(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	good, bad := State{Health: 1}, State{Health: 1, Pos: [3]float64{1e12, 0, 0}}
	for _, tc := range []struct {
		name   string
		set    func(s *Snapshot)
		copies []EntryCopy
		valid  bool
	}{
		{name: "all accepted", set: func(s *Snapshot) { s.Set(0, 1, pc, &good); s.Set(1, 2, pc, &good) },
			copies: []EntryCopy{{Dst: 2, Src: 0}, {Dst: 3, Src: 1}}, valid: true},
		{name: "a copy of a refused entry", set: func(s *Snapshot) { s.Set(0, 1, pc, &good); s.Set(1, 2, pc, &bad) },
			copies: []EntryCopy{{Dst: 2, Src: 0}, {Dst: 3, Src: 1}}, valid: false},
		{name: "a copy of an empty entry", set: func(s *Snapshot) { s.Set(0, 1, pc, &good); s.Set(1, 2, nil, &good) },
			copies: []EntryCopy{{Dst: 2, Src: 0}, {Dst: 3, Src: 1}}, valid: false},
		{name: "an entry neither set nor copied", set: func(s *Snapshot) { s.Set(0, 1, pc, &good); s.Set(1, 2, pc, &good) },
			copies: []EntryCopy{{Dst: 2, Src: 0}}, valid: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := writerFor(t, reg)
			s := w.Next(4)
			tc.set(s)
			w.SealCopies(s, tc.copies)
			if s.valid != tc.valid {
				t.Fatalf("valid %v, want %v", s.valid, tc.valid)
			}
		})
	}
}
