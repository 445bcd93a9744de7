package notify

import "time"

// rttEstimator is RFC 6298 / RFC 9002 §5 smoothing plus an RFC 3550-style
// jitter on consecutive samples. The seeds give no estimator (checklist G-3,
// D-5); RT-3's sample excludes nothing because packets are never resent here.
//
// prev > 0 once there is a sample (every sample is above 0: the caller takes
// one only for raw > 0): a flag of its own was 8 bytes of every Conn.
type rttEstimator struct {
	srtt   time.Duration
	rttvar time.Duration
	jitter time.Duration
	prev   time.Duration // previous adjusted sample; 0: none yet
}

func (e *rttEstimator) init(initial time.Duration) {
	*e = rttEstimator{srtt: initial, rttvar: initial / 2}
}

// sample folds in one measurement: raw = ack arrival − send time, delay = the
// peer's reported hold time of the acknowledged packet.
//
// QUIC subtracts the ack delay only when raw ≥ min_rtt + delay. Here every
// header carries a delay of up to one send interval (50 ms at 20 pkt/s), so
// min_rtt — itself a raw sample — already contains the smallest delay seen, and
// that guard would refuse to subtract about half the time (biasing srtt upward
// by ~delay/2). The delay is subtracted whenever it is smaller than raw; a delay
// that is not (impossible for an honest peer) is ignored.
func (e *rttEstimator) sample(raw, delay time.Duration) {
	s := raw
	if delay < raw {
		s = raw - delay
	}
	s = max(s, 1) // > 0: prev marks a sample (raw > 0 at the caller, so this changes nothing there)
	if e.prev == 0 {
		e.srtt = s
		e.rttvar = s / 2
		e.prev = s
		return
	}
	e.rttvar = (3*e.rttvar + absDur(e.srtt-s)) / 4
	e.srtt = (7*e.srtt + s) / 8
	e.jitter += (absDur(s-e.prev) - e.jitter) / 16
	e.prev = s
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
