package ghost

import "testing"

// BenchmarkTables1000PumpCrowd is BenchmarkTables1000Pump with the node's
// mix of records (informative): cmd/capacity's zones hold ten players to
// an NPC (2,000 bots, 200 NPCs), and every player's update carries its
// move sequence (Extra[0], a few thousand into a session: a 25-bit gamma
// code, one or two more a tick) and its yaw, and one tick in four a new
// walking velocity (a bot steering to its waypoint). Such a record is
// 70–105 bits with the id and mask, past one run of the bit writer's
// fast path (runMax), where BenchmarkTables1000Pump's ghosts (a player in
// four, only position and yaw changing) fit one.
func BenchmarkTables1000PumpCrowd(b *testing.B) {
	tick := 0
	benchTablesIn(b, 1000, func(i int) bool { return i%11 != 0 }, 0, func(i int, s *State) {
		if i == 0 {
			tick++
		}
		if i%11 == 0 {
			return
		}
		if s.Extra[0] == 0 {
			s.Extra[0] = uint32(4000 + 37*i%2000)
		}
		s.Extra[0] += uint32(1 + (tick+i)%2)
		if (tick+i)%4 == 0 {
			s.Vel = [3]float64{float64((tick+i)%13)/2 - 3, 0, float64((tick*7+i)%11)/2 - 2.5}
		}
	}, true, true, true, false, true, false)
}
