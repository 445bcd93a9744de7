package ghost

import "testing"

// BenchmarkTables1000Players is BenchmarkTables1000 with the players'
// state as the zones send it: every player update carries the move
// sequence (Extra[0], one more each tick) and the walking velocity, so
// its mask is position, yaw, velocity and extra — the groups a snapshot
// codes once at Seal for every table.
func BenchmarkTables1000Players(b *testing.B) {
	benchTablesWith(b, 1, func(i int, s *State) {
		if i%4 == 0 {
			s.Extra[0]++
			s.Vel = [3]float64{float64(i%7) - 3, 0, float64(i%5) - 2}
		}
	}, false)
}
