package ghost

import (
	"fmt"
	"math"
	"time"
)

// HistoryLen is how many timestamped positions a ghost keeps: for
// interpolation (at 20 updates/s, 800 ms) and as the references of the
// position prediction, which may reach back posRingLen+1 values for a late
// packet.
const HistoryLen = 16

// snapshot is one received position, at the server time of the state it
// came from. It holds the quantized codes only (32 bytes, two a cache line):
// the position is history.q's value of them, computed when a pose needs it
// (the mirror decodes far more positions than a renderer samples, and 16
// snapshots of 64 bytes were most of a Ghost and of an observer's misses).
type snapshot struct {
	ms    int64 // stamp, ms in the mirror's server clock
	q     [3]uint32
	rest  bool // an update that changed no axis: the entity was at q at ms
	synth bool // inserted by the interpolator (StartLead), not a received value
	yaw   float64
}

func (s *snapshot) time() time.Duration { return time.Duration(s.ms) * time.Millisecond }

func (s *snapshot) val() posVal { return posVal{t: stamp(s.ms), q: s.q} }

// history is a bounded ring of snapshots in increasing stamp order.
type history struct {
	// head: index of the oldest. int32: with them a Ghost is 704 bytes,
	// 11 cache lines, so in a page every ghost starts a line and s
	// starts one too: a snapshot pair (the two newest, often) shares one.
	n, head int32
	quant   *quant // the codes' quantizer (the mirror's registry's)
	s       [HistoryLen]snapshot
}

// reset empties h, whose codes q quantizes.
func (h *history) reset(q *quant) { h.n, h.head, h.quant = 0, 0, q }

// pos is the position of s, a snapshot of h: quant.value(s.q), unrolled
// (value's loop is not, and a pose computes two; TestMirrorPosesRecorded
// holds the two to the same bits).
func (h *history) pos(s *snapshot) [3]float64 {
	q := h.quant
	return [3]float64{
		q.min[0] + float64(float64(s.q[0])*q.prec), // no FMA: as value
		q.min[1] + float64(float64(s.q[1])*q.prec),
		q.min[2] + float64(float64(s.q[2])*q.prec),
	}
}

// at is the i-th oldest snapshot, 0 ≤ i < n (HistoryLen is a power of two:
// the ring index is a mask, not a signed modulo).
func (h *history) at(i int) *snapshot { return &h.s[(int(h.head)+i)&(HistoryLen-1)] }

// HistoryLen must be a power of two (at, insert).
var _ [0]struct{} = [HistoryLen & (HistoryLen - 1)]struct{}{}

func (h *history) newest() *snapshot { return h.at(int(h.n) - 1) }

// insert puts s in stamp order. A received value whose stamp is already held
// is the same value (one view, one state) and is not stored twice; when full,
// the oldest goes (or s, if it is the oldest).
func (h *history) insert(s snapshot) {
	i := int(h.n) // insertion index
	for i > 0 && h.at(i-1).ms > s.ms {
		i--
	}
	if i > 0 && h.at(i-1).ms == s.ms {
		if prev := h.at(i - 1); prev.synth || !s.synth {
			*prev = s
		}
		return
	}
	if h.n == HistoryLen {
		if i == 0 {
			return
		}
		h.head = (h.head + 1) & (HistoryLen - 1)
		h.n--
		i--
	}
	for j := int(h.n); j > i; j-- {
		*h.at(j) = *h.at(j - 1)
	}
	*h.at(i) = s
	h.n++
}

// ref returns the two newest received (not synthetic) values stamped before
// ms: the pair the server predicted from; n (0, 1 or 2) says how many exist
// (b is the newer).
func (h *history) ref(ms int64) (a, b posVal, n int) {
	for i := int(h.n) - 1; i >= 0; i-- {
		s := h.at(i)
		if s.synth || s.ms >= ms {
			continue
		}
		if n == 0 {
			b, n = s.val(), 1
			continue
		}
		return s.val(), b, 2
	}
	return a, b, n
}

// Pose is what a renderer draws for a remote entity.
type Pose struct {
	Pos [3]float64
	Yaw float64
}

// SampleMode says how Interpolator.Sample produced a pose.
type SampleMode uint8

const (
	// Interpolated: between two received states (the normal case).
	Interpolated SampleMode = iota
	// Extrapolated: past the newest state, by at most MaxExtrapolation.
	Extrapolated
	// Held: no usable motion (one state, before the oldest, or extrapolation
	// exhausted): the nearest known state.
	Held
)

func (m SampleMode) String() string {
	switch m {
	case Interpolated:
		return "interpolated"
	case Extrapolated:
		return "extrapolated"
	}
	return "held"
}

// Interpolator renders remote entities a fixed delay in the past, between
// states the client has received, so jitter and the gaps between updates
// are hidden (checklist CTL-7; seed 004 § Time: "interpolate to known values
// rather than predict. This adds a fixed amount of lag, but that's ok").
// When updates are late it extrapolates along the last motion, for at most
// MaxExtrapolation, then holds. The zero Interpolator renders the newest
// state without delay and never extrapolates; use DefaultInterpolator.
type Interpolator struct {
	// Delay is how far behind the estimated server time entities are drawn.
	// It should cover the update interval plus jitter (CTL-7: IP ≥ PP).
	Delay time.Duration
	// MaxExtrapolation bounds prediction past the newest state.
	MaxExtrapolation time.Duration
	// StartLead: when an entity at rest starts moving again, the client
	// assumes it left its resting place this long before the first moving
	// state (instead of creeping from the time of the rest marker). Zero means
	// interpolate straight from the rest marker.
	StartLead time.Duration
}

// DefaultInterpolator draws 100 ms behind, extrapolates up to 250 ms and
// assumes motion starts 50 ms (one 20 Hz tick) before it is first reported.
func DefaultInterpolator() Interpolator {
	return Interpolator{Delay: DefaultInterpDelay, MaxExtrapolation: DefaultMaxExtrapolation, StartLead: 50 * time.Millisecond}
}

// Validate rejects negative durations.
func (ip Interpolator) Validate() error {
	if ip.Delay < 0 || ip.MaxExtrapolation < 0 || ip.StartLead < 0 {
		return fmt.Errorf("%w: interpolator durations must not be negative: %+v", ErrConfig, ip)
	}
	return nil
}

// Sample returns g's pose at server time at (in the Mirror's server clock,
// e.g. Mirror.RenderTime(now)).
func (ip Interpolator) Sample(g *Ghost, at time.Duration) (Pose, SampleMode) {
	h := &g.hist
	if h.n == 0 {
		return Pose{Pos: g.State.Pos, Yaw: g.State.Yaw}, Held
	}
	newest := h.newest()
	if nt := newest.time(); at >= nt {
		if h.n < 2 || at == nt {
			return Pose{Pos: h.pos(newest), Yaw: newest.yaw}, Held
		}
		prev := h.at(int(h.n) - 2)
		dt := at - nt
		mode := Extrapolated
		if dt > ip.MaxExtrapolation {
			dt, mode = ip.MaxExtrapolation, Held
		}
		f := float64(dt) / float64(nt-prev.time())
		return h.lerpPose(newest, prev, -f), mode
	}
	oldest := h.at(0)
	if at <= oldest.time() {
		return Pose{Pos: h.pos(oldest), Yaw: oldest.yaw}, Held
	}
	for i := int(h.n) - 2; i >= 0; i-- {
		a := h.at(i)
		if at1 := a.time(); at1 <= at {
			b := h.at(i + 1)
			return h.lerpPose(a, b, float64(at-at1)/float64(b.time()-at1)), Interpolated
		}
	}
	return Pose{Pos: h.pos(oldest), Yaw: oldest.yaw}, Held // unreachable: oldest.t < at
}

// lerpPose goes from a towards b, snapshots of h, by f (f < 0
// extrapolates away from b).
func (h *history) lerpPose(a, b *snapshot, f float64) Pose {
	var p Pose
	ap, bp := h.pos(a), h.pos(b)
	for i := range 3 {
		p.Pos[i] = ap[i] + (bp[i]-ap[i])*f
	}
	d := math.Remainder(b.yaw-a.yaw, 2*math.Pi) // shortest arc
	p.Yaw = math.Remainder(a.yaw+d*f, 2*math.Pi)
	return p
}
