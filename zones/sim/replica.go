package sim

import "time"

// releaseGrace is how many ticks an entity this zone just handed away stays
// as a replica even though its new owner's batches do not list it: a batch
// the new owner built before the Commit reached it cannot.
const releaseGrace = 3

// sendReplicas builds one batch per neighbour: every entity this zone owns
// within BorderRange of the neighbour's rectangle (DESIGN §5: players at a
// border see across it). Batches are complete, not deltas: the receiver
// replaces what it had, so a lost or late batch heals with the next one.
func (z *Zone) sendReplicas(now time.Duration) {
	r2 := z.border * z.border
	for _, n := range z.nbrs {
		b := ReplicaBatch{From: z.cfg.Zone, To: n.ID, Tick: z.tick, Sent: now}
		for s := range z.ents {
			e := &z.ents[s]
			if e.role != roleOwned && e.role != roleFrozen {
				continue
			}
			if n.Dist2(float64(e.state.Pos[0]), float64(e.state.Pos[2])) > r2 {
				continue
			}
			b.Entities = append(b.Entities, Replica{
				ID: e.id, Kind: e.kind, Epoch: e.epoch, State: e.state,
				Health: e.health, Flags: e.flags, Name: e.name, Extra: e.extra,
			})
		}
		z.out.Replicas = append(z.out.Replicas, b)
	}
}

// Replicas takes a neighbour's batch: its entities near this zone, all of
// them. Entities this zone owns are never overwritten (ownership wins over
// a copy), an older epoch never overwrites a newer one (a batch from a
// previous owner that arrives late), and the neighbour's replicas missing
// from the batch are dropped.
func (z *Zone) Replicas(now time.Duration, b *ReplicaBatch) {
	if b.To != z.cfg.Zone || b.From == z.cfg.Zone {
		z.stats.ReplicasMisrouted++
		return
	}
	z.batchSeq++
	seq := z.batchSeq
	for i := range b.Entities {
		r := &b.Entities[i]
		s, ok := z.byID[r.ID]
		if ok {
			e := &z.ents[s]
			if e.role != roleReplica || r.Epoch < e.epoch {
				z.stats.ReplicasIgnored++
				if e.role == roleReplica && e.owner == b.From {
					e.seenBatch = seq // still listed by its owner: not swept
				}
				continue
			}
		} else {
			s = z.slotAlloc(r.ID)
			z.ents[s].role = roleReplica
		}
		e := &z.ents[s]
		e.kind, e.epoch, e.owner, e.seen, e.seenBatch, e.released = r.Kind, r.Epoch, b.From, now, seq, false
		e.state, e.health, e.flags, e.name, e.extra = r.State, r.Health, r.Flags, r.Name, r.Extra
	}
	for s := range z.ents {
		e := &z.ents[s]
		if e.role == roleReplica && e.owner == b.From && e.seenBatch != seq {
			if e.released && now-e.seen < releaseGrace*z.period {
				// Just handed to b.From, whose batch may have been built
				// before it took the entity: absence proves nothing yet.
				continue
			}
			z.slotFree(int32(s))
		}
	}
	z.stats.ReplicaBatches++
}

// expireReplicas drops replicas whose owner has sent nothing for ReplicaTTL.
func (z *Zone) expireReplicas(now time.Duration) {
	for s := range z.ents {
		e := &z.ents[s]
		if e.role == roleReplica && now-e.seen > z.cfg.ReplicaTTL {
			z.slotFree(int32(s))
			z.stats.ReplicasExpired++
		}
	}
}
