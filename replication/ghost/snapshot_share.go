package ghost

// EntryCopy says that a snapshot entry repeats another of the same
// snapshot (SealCopies): entry Dst gets entry Src's entity, class and
// state.
type EntryCopy struct {
	Dst, Src uint32
}

// SealCopies is Seal for a snapshot some of whose entries repeat others:
// each copy's Dst entry, left empty (not Set), ends up as if it had been
// Set with its Src entry's entity, class and state before Seal — the same
// entry, stamps, flags and validity, which TestSealCopiesIsSeal checks
// against Seal — but its state is checked, quantized and coded once, for
// Src. A zone whose far viewers get a held second entry of every slot
// gives it so on the ticks it refreshes it (the held entry equals the
// live one then), instead of coding each such entry twice.
//
// Src entries must be Set or SetHeld (or left empty: the copy is then
// empty too). A Dst given twice or already Set, or a Src that is a Dst,
// panics.
func (w *SnapshotWriter) SealCopies(s *Snapshot, copies []EntryCopy) {
	if len(copies) == 0 {
		w.Seal(s)
		return
	}
	ents := s.ents
	for _, c := range copies {
		if int(c.Dst) >= len(ents) || int(c.Src) >= len(ents) || ents[c.Dst].class != nil || s.vw[c.Dst].fl != 0 {
			panic("ghost: SealCopies: a copy's destination is out of range or already set")
		}
		s.vw[c.Dst].fl = vwCopy // claimed: a second copy to it panics
	}
	for _, c := range copies {
		if s.vw[c.Src].fl&vwCopy != 0 {
			panic("ghost: SealCopies: a copy's source is another copy's destination")
		}
	}
	// Seal drops the writer's reference to the previous snapshot, whose
	// entries the copies' stamps are diffed against: hold it until done
	// (a count, not Retain: that would turn on reuse for a series nobody
	// else holds).
	prev := w.last
	if prev != nil {
		prev.refs.Add(1)
		defer prev.Release()
	}
	for _, c := range copies {
		s.vw[c.Dst].fl = 0
	}
	w.Seal(s)
	var pents []snapEnt
	var pchg []uint32
	if prev != nil && prev.source == s.source && prev.stride == s.stride {
		pents, pchg = prev.ents, prev.chg
	}
	st := s.stride
	for _, c := range copies {
		i := int(c.Dst)
		e, v, src := &ents[i], &s.vw[i], &ents[c.Src]
		// Field by field: one pointer write, not the whole entry's copy
		// under the write barrier.
		e.entity, e.class, e.qpos, e.yawQ, e.bad, e.gc, e.state = src.entity, src.class, src.qpos, src.yawQ, src.bad, src.gc, src.state
		chg := s.chg[i*st : i*st+st]
		cl := e.class
		if cl == nil || e.bad != snapOK {
			continue // as Seal left it: empty, stamps cleared
		}
		if i >= len(pents) || pents[i].class != cl || pents[i].entity != e.entity {
			// New at this index: every group stamped.
			for g := range chg {
				chg[g] = s.seq
			}
			v.now = cl.all
			continue
		}
		p := &pents[i]
		copy(chg, pchg[i*st:i*st+st])
		if p.bad == snapOK {
			v.fl |= vwKept
			if samePos(&p.state, &e.state) && sameBeyondPos(&p.state, &e.state) {
				continue // still: nothing to stamp
			}
		}
		if cl.posIdx >= 0 && (p.bad != snapOK || p.qpos != e.qpos) {
			chg[cl.posIdx] = s.seq
			v.now |= cl.posBit
		}
		if !sameBeyondPos(&p.state, &e.state) {
			for g := range cl.Groups {
				if gr := &cl.Groups[g]; !gr.pos && changed(gr, g == cl.yawIdx, p, e) {
					chg[g] = s.seq
					v.now |= 1 << uint(g)
				}
			}
		}
	}
	// Seal counted the copies' entries empty: valid only if nothing else
	// was, which one pass over the entries tells.
	valid := true
	for i := range ents {
		if ents[i].class == nil || ents[i].bad != snapOK {
			valid = false
			break
		}
	}
	s.valid = valid
}

// changed is gr.Changed(&p.state, &e.state) for entries p and e of gr's
// class, e accepted: where both entries hold gr's wire value coded
// (snapEnt.gc, or yawQ for the class's yaw group), a compare of the codes
// — Changed compares wire values — instead of the call (≈ 80
// instructions for velocity and yaw).
func changed(gr *Group, yaw bool, p, e *snapEnt) bool {
	if p.bad == snapOK {
		if k := int(gr.slot) - 1; k >= 0 && p.gc[k] != noCode && e.gc[k] != noCode {
			return p.gc[k] != e.gc[k]
		}
		if yaw && gr.yc.bits <= 16 {
			return p.yawQ != e.yawQ
		}
	}
	return gr.Changed(&p.state, &e.state)
}

// vwCopy marks a copy's destination between SealCopies' check and Seal
// (never set in a sealed snapshot).
const vwCopy = 1 << 7
