package notify

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/internal/intern"
)

type recState uint8

const (
	recPending recState = iota
	recDelivered
	recDropped
)

// record is the sender's memory of one packet until its fate is popped.
// 16 bytes, a ring of minRecs in the 64-byte size class (24 and 96 while L
// took 64 bits and F 32): L as its low 32 bits, the full value being the
// newest peer sequence accepted since (rxL, never below it) less their
// distance — the peer sends 2^32 packets in no record's lifetime; F as its
// distance below L+1, which firstMissing keeps within [0, L+1−H]
// (H ≥ L+1−K: at most MaxReorderThreshold, 32, a byte).
type record struct {
	sentAt time.Duration
	// carriedL: the low 32 bits of the ack L its header carried (valid
	// when acked; carried returns it whole).
	carriedL uint32
	// fBack is L+1 − F, F the first peer sequence not yet resolved at the
	// peer once that header is processed (valid when acked).
	fBack uint8
	state recState
	acked bool // the header carried an ack section
}

// fBackMax fails to compile unless every fBack (≤ MaxReorderThreshold)
// fits its byte.
var _ = [1]struct{}{}[min(255/MaxReorderThreshold, 1)-1]

// carried returns the whole L that r's header carried: r.acked means a
// packet was accepted by then (hasRx), and rxL has only grown since.
func (c *Conn) carried(r *record) uint64 {
	return c.rxL - uint64(uint32(c.rxL)-r.carriedL)
}

// Conn is the packet-notify state of one peer pair (checklist PN-11): a sender
// half that numbers our packets and learns their fates, and a receiver half that
// filters the peer's packets and reports what it accepted.
//
// Seed: Torque Network Library packet notify (004 § Packet Notify): every header
// carries our sequence number, the newest sequence we accepted from the peer and
// a window of ack bits. Unlike TNL the receiver alone decides when a missing
// packet is given up (QUIC-style packet and time thresholds) and the sender
// declares "dropped" only when an ack header says so, which makes the sender's
// delivered set equal the receiver's accepted set. See docs/protocol.md.
//
// Receiver state over the peer's sequences:
//
//	    abandoned/stale │ acceptable, maybe missing │ newest accepted
//	... ────────────────┼───────────────────────────┼─ L ─── L+AckWindow: too far
//	                    H (≥ L−K+1)
//
// The zero Conn is not usable; use New. The sender ring is sized by use
// (growRecs, trimRecs) and the rare counters are made on the first; the
// steady state allocates nothing. Not safe for concurrent use; the connection
// actor owns it.
//
// A datagram's receive and the send after it read nearly every field, so
// the Conn is 192 bytes, the size class that starts every object on a
// cache line: three lines a Conn, where the 240-byte one spanned 4.75 on
// average (TestConnLayout). The 48 bytes went from headSeq and
// firstPending (their low 32 bits), pending (counted from the records:
// InFlight), Received (derived: received), the horizon and confirmed F
// (distances in a byte each), the hasRx and hasIv flags (noRx,
// noInterval) and the ring's sizing period (in rare's object, used only
// while the ring is larger than minRecs).
type Conn struct {
	cfg *shared // shared (interned), never written: ReorderThreshold and AckWindow are read there (reorderK, ackWin), and the starts

	// Sender half: our sequence numbers.
	nextSeq uint64
	recs    []record // ring indexed by seq mod len (a power of two)
	peerL   uint64   // newest L processed (when hasPeerL): our largest sequence the peer acknowledged
	// headLo and firstPendingLo are the low 32 bits of headSeq (the
	// oldest record not yet popped) and firstPending (the oldest
	// unresolved record, or nextSeq): both lie within MaxInFlight ≤ 2^16
	// at or below nextSeq, which rebuilds them (seqOf). 32-bit
	// differences from uint32(nextSeq) count the records (inRing).
	headLo, firstPendingLo uint32

	// Receiver half: the peer's sequence numbers.
	rxL      uint64        // newest accepted (when hasRx)
	rxLAt    time.Duration // arrival time of rxL (ack delay)
	interval time.Duration // smoothed inter-arrival time per sequence number; noInterval until a sample arms the time threshold
	// rxBits: the accepted bits, a ring indexed by seq mod 64·len (AckWindow
	// rounded up to a power of two). Its room past len holds the gap
	// times (gaps): for missing s in [H, L), when the first later packet
	// arrived, a ring of ReorderThreshold rounded up to a power of two.
	// One slice for both: a second header was 24 bytes of every Conn (352
	// bytes with it and the RTT estimator's flag, the 320 class; now 288).
	// The gap room is made when the first gap opens (growGaps): a link
	// that never loses or reorders a packet — loopback, most LAN and many
	// WAN connections — never reads it, and it was 32 of the 64 bytes.
	rxBits     []uint64
	confirmedL uint64 // largest L carried by one of our headers known delivered
	// rxHBack is rxL − H, the horizon's distance below the newest (at
	// most K−1 ≤ 31: receive and Tick keep H ≥ L+1−K), or noRx before
	// the first packet is accepted (hasRx; H is peerStart then).
	rxHBack uint8
	// confirmedFBack is confirmedL + 1 − confirmedF, every peer sequence
	// below confirmedF being resolved at the peer: at most K, because
	// every header's F is at least its L+1−K (F ≥ H).
	confirmedFBack uint8
	hasPeerL       bool // peerL is set
	// gapOpen: a sequence in [H, rxL) may be missing. False means none
	// is (a loss-free link, nearly always), and Tick, firstMissing and
	// receive's count of the abandoned skip their scans of the ring (≈ 30
	// instructions each, Tick on every Poll). Set where receive opens a
	// gap, cleared by a Tick that finds none.
	gapOpen    bool
	rttSamples uint32 // at most one a packet received: 32 bits last two years at 60 a second

	rtt      rttEstimator
	lossRate float64
	stats    connStats  // all but the rare ones and those Stats derives
	rare     *rareState // ForcedDrops, Duplicates, Stale, TooFar, BadHeader, WindowEvicted and the ring's sizing period: made on the first
}

// noRx is rxHBack before the first packet is accepted: above any
// distance (MaxReorderThreshold − 1).
const noRx = 0xff

// The horizon's distance below the newest and confirmed F's below
// confirmedL+1 fit their bytes (noRx kept free): this fails to compile
// otherwise.
var _ = [1]struct{}{}[min(noRx/MaxReorderThreshold, 1)-1]

// noInterval is interval before its first sample (every sample is ≥ 0).
const noInterval time.Duration = -1

// hasRx reports whether a packet was accepted (rxL and rxLAt are set).
func (c *Conn) hasRx() bool { return c.rxHBack != noRx }

// rxH is the horizon, the lowest acceptable sequence, once hasRx (it is
// peerStart before).
func (c *Conn) rxH() uint64 { return c.rxL - uint64(c.rxHBack) }

// confirmedF is the lowest peer sequence not known resolved at the peer.
func (c *Conn) confirmedF() uint64 { return c.confirmedL + 1 - uint64(c.confirmedFBack) }

// seqOf rebuilds headSeq or firstPending from its low 32 bits.
func (c *Conn) seqOf(lo uint32) uint64 { return c.nextSeq - uint64(uint32(c.nextSeq)-lo) }

// inRing counts the records not yet popped, [headSeq, nextSeq).
func (c *Conn) inRing() uint64 { return uint64(uint32(c.nextSeq) - c.headLo) }

// shared is what a Conn reads but never writes, the same for the Conns of
// one config: the Config, where both numberings start (0 but in tests that
// cross the wrap points: newConn) and the ring's sizing period (tests
// change it). Interned (configs): 24 bytes of every Conn otherwise.
type shared struct {
	Config
	localStart, peerStart uint64
	trimEvery             time.Duration
}

// configs interns the Configs of Conns: every connection of a process
// shares one read-only copy instead of 40 bytes each. Bounded: past
// intern.Max distinct values (a server has one or two) a Conn gets its own.
var configs intern.Table[shared]

// maxStartSeq keeps every sum of a sequence number and a window far from overflow.
const maxStartSeq = 1 << 62

// New returns the notify state of a fresh connection: both directions start at
// sequence number 0.
func New(cfg Config) (*Conn, error) {
	return newConn(cfg, 0, 0)
}

// newConn starts our numbering at localStart and expects the peer's first packet
// at peerStart. Tests use it to cross every width's wrap point.
func newConn(cfg Config, localStart, peerStart uint64) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if localStart >= maxStartSeq || peerStart >= maxStartSeq {
		return nil, fmt.Errorf("%w: start sequence beyond 2^62", ErrConfig)
	}
	nrec := nextPow2(cfg.MaxInFlight)
	nbit := nextPow2(cfg.AckWindow)
	c := &Conn{
		cfg:            configs.Get(shared{Config: cfg, localStart: localStart, peerStart: peerStart, trimEvery: recTrimEvery}),
		nextSeq:        localStart,
		headLo:         uint32(localStart),
		firstPendingLo: uint32(localStart),
		recs:           make([]record, min(nrec, minRecs)),
		interval:       noInterval,
		rxBits:         make([]uint64, nbit/64),
		confirmedL:     peerStart,
		confirmedFBack: 1, // confirmedF = peerStart: nothing is resolved at the peer
		rxHBack:        noRx,
	}
	c.rtt.init(cfg.InitialRTT)
	return c, nil
}

// reorderK and ackWin are the Config's ReorderThreshold and AckWindow, read
// from the shared Config rather than copied into every Conn (16 bytes).
func (c *Conn) reorderK() uint64 { return uint64(c.cfg.ReorderThreshold) }
func (c *Conn) ackWin() uint64   { return uint64(c.cfg.AckWindow) }

// The rings' index masks, from their lengths (powers of two): three
// fields fewer per connection.
func (c *Conn) recMask() uint64 { return uint64(len(c.recs) - 1) }
func (c *Conn) rxMask() uint64  { return uint64(len(c.rxBits)*64 - 1) }
func (c *Conn) gapMask() uint64 { return uint64(cap(c.rxBits) - len(c.rxBits) - 1) }

// gaps is the gap-time ring, in rxBits' room past its length: empty
// until the first gap opens (growGaps), and read only while one is open.
func (c *Conn) gaps() []uint64 { return c.rxBits[len(c.rxBits):cap(c.rxBits)] }

// growGaps gives rxBits its gap-time room, nextPow2(ReorderThreshold)
// words past the bits: once, when the connection's first gap opens, kept
// from then on (a link that lost a packet loses more), so the steady state
// allocates nothing.
func (c *Conn) growGaps() {
	nb := make([]uint64, len(c.rxBits), len(c.rxBits)+nextPow2(c.cfg.ReorderThreshold))
	copy(nb, c.rxBits)
	c.rxBits = nb
}

// maxRecs is how far recs grows on demand: nextPow2(MaxInFlight).
func (c *Conn) maxRecs() int { return nextPow2(c.cfg.MaxInFlight) }

// minRecs is the sender ring's first size (64 B: 16-byte records). It doubles up to
// nextPow2(MaxInFlight) as packets stay in flight: a full-size ring per
// connection was the largest part of a server's memory per client, and most
// links never have more than a few dozen packets unresolved — a server
// sending 20 packets a second to a client that answers at 30 has one to
// three (trimRecs keeps 4 up to a peak of 3; 8 records of 24 bytes, 192 B, were the
// first size before). trimRecs sizes it by use.
const minRecs = 4

// growRecs doubles the sender ring, keeping every live record [headSeq,
// nextSeq) at its sequence's slot under the new mask. A ring leaving its
// first size starts a sizing period (trimRecs) at now.
func (c *Conn) growRecs(now time.Duration) {
	n := 2 * len(c.recs)
	if n > c.maxRecs() {
		panic("notify: sender ring beyond MaxInFlight") // Send checks the bound first
	}
	if len(c.recs) == minRecs {
		z := c.rareStats()
		z.recPeak, z.recPeakPrev, z.recTrimAt = 0, 0, now+c.cfg.trimEvery
	}
	c.recs = c.copyRecs(n)
}

// copyRecs returns a ring of n slots holding the live records at their
// sequences' slots.
func (c *Conn) copyRecs(n int) []record {
	nr := make([]record, n)
	mask := uint64(n - 1)
	for s := c.seqOf(c.headLo); s < c.nextSeq; s++ {
		nr[s&mask] = c.recs[s&c.recMask()]
	}
	return nr
}

// recTrimEvery is the sender ring's sizing period: once per period, a ring
// twice as large as a quarter above the most records it held in this and
// the previous period shrinks to that (not below minRecs). A backlog (fates
// late for a while: a slow peer, a stalled server) no longer keeps its room
// for the connection's life; two periods of hysteresis keep a link whose
// fate delay wavers from growing and shrinking every second.
const recTrimEvery = time.Second

// trimRecs applies recTrimEvery's rule and starts a new period at now.
// The sizing runs only while the ring is larger than minRecs (a ring of
// minRecs has nothing to give back): its period and peaks are in rare's
// object, not every Conn (12 bytes), and a link that never holds more
// than minRecs−1 records skips the peak and the period's check on every
// send.
func (c *Conn) trimRecs(z *rareState, now time.Duration) {
	z.recTrimAt = now + c.cfg.trimEvery
	peak := int(max(z.recPeak, z.recPeakPrev))
	z.recPeakPrev, z.recPeak = z.recPeak, uint32(c.inRing())
	want := max(minRecs, nextPow2(peak+peak/4+1))
	if 2*want > len(c.recs) || uint64(want) <= c.inRing() {
		return
	}
	c.recs = c.copyRecs(want)
}

func nextPow2(n int) int {
	return 1 << bits.Len(uint(n-1))
}

// windowLow is the lowest sequence of the AckWindow ending at l, not below floor.
func windowLow(l, win, floor uint64) uint64 {
	if l+1 < floor+win {
		return floor
	}
	return l + 1 - win
}

// ---- send ----

// WriteHeader assigns the next sequence number, writes the header for a packet
// of type t at now, and records the packet in flight. Every packet consumes a
// sequence number, ack-only and disconnect packets included: it is the future
// AEAD nonce. On error nothing is written (w is rewound) and no sequence number
// is consumed. Call PopFates afterwards: reaching MaxInFlight force-drops the
// oldest record.
func (c *Conn) WriteHeader(w *bitstream.Writer, t PacketType, now time.Duration) (seq uint64, err error) {
	if t >= typeReserved {
		return 0, ErrBadType
	}
	if c.inRing() >= uint64(c.cfg.MaxInFlight) {
		return 0, ErrFatesPending
	}
	seq = c.nextSeq
	span := seq + 1 - c.cfg.localStart // seq − largest acked; "largest acked" is localStart−1 before any ack
	if c.hasPeerL {
		span = seq - c.peerL
	}
	sw, code, codeLen, ok := seqWidth(span)
	if !ok {
		return 0, ErrSeqSpan
	}
	start := w.BitLen()
	bw := bitWriter{w: w}
	// Type, width code and sequence in one field (at most 2+2+32 bits):
	// the bit writer only concatenates fields, so the bits are the same.
	bw.bits(uint64(t)|code<<2|(seq&(1<<sw-1))<<(2+codeLen), 2+codeLen+sw)
	ackL, ackF, acked := c.writeAck(&bw, seq, now)
	bw.flush()
	if bw.err != nil {
		w.Truncate(start)
		return 0, bw.err
	}
	if c.inRing() == uint64(len(c.recs)) {
		c.growRecs(now)
	}
	c.recs[seq&c.recMask()] = record{sentAt: now, carriedL: uint32(ackL), fBack: uint8(ackL + 1 - ackF), acked: acked}
	c.nextSeq++
	if len(c.recs) > minRecs { // the sizing: the period's peak, and a trim when it ends
		z := c.rare // made by growRecs
		z.recPeak = max(z.recPeak, uint32(c.inRing()))
		if now >= z.recTrimAt {
			c.trimRecs(z, now)
		}
	}
	c.stats.HeaderBits += uint64(w.BitLen() - start)
	if c.inRing() >= uint64(c.cfg.MaxInFlight) {
		if r := &c.recs[uint64(c.headLo)&c.recMask()]; r.state == recPending {
			// Bound the sender's memory: a peer that never answers must not pin
			// records forever. This may be a false drop (see docs, "forced drops").
			c.rareStats().ForcedDrops++
			c.drop(r)
			c.skipResolved()
		}
	}
	return seq, nil
}

// writeAck writes the ack section about the peer's sequences and returns what
// the record must remember for ack-of-ack: the L and F this header carried.
func (c *Conn) writeAck(bw *bitWriter, seq uint64, now time.Duration) (l, f uint64, acked bool) {
	if !c.hasRx() || (c.rxL == c.confirmedL && c.confirmedFBack == 0) { // confirmedF > rxL
		// Nothing accepted yet, or the peer is known to hold everything we could say.
		bw.bits(ackNoneCode, ackNoneLen)
		return 0, 0, false
	}
	l = c.rxL
	w, code, codeLen, ok := ackWidth(l - c.confirmedL)
	if !ok {
		if bw.err == nil {
			bw.err = ErrSeqSpan
		}
		return 0, 0, false
	}
	bw.bits(code|(l&(1<<w-1))<<codeLen, codeLen+w) // both in one field, as in WriteHeader
	// Report range [r, l-1]: everything the peer may not have resolved yet.
	r := max(c.confirmedF(), windowLow(l, c.ackWin(), c.cfg.peerStart))
	var m uint64
	if r < l {
		m = l - r
	}
	holes := c.missing(r, l)
	delay := uint64(encodeDelay(now-c.rxLAt, seq))
	if holes == 0 {
		// allOK, then the delay: one field (nearly every header).
		bw.bits(1|delay<<1, 1+delayCodeBits)
		return l, c.firstMissing(), true
	}
	bw.bits(0, 1) // not allOK
	bw.gamma(m)
	bw.gamma(holes)
	// Holes in ascending order as gaps from R-1: the lowest hole is usually R
	// itself (R is a confirmed F, the first hole at the time), so it costs 1 bit.
	prev := r - 1
	var lastAbandoned uint64 // highest hole below the horizon, +1
	rxH := c.rxH()
	for x := c.nextMissing(r, l); x < l; x = c.nextMissing(x+1, l) {
		bw.gamma(x - prev)
		prev = x
		if x < rxH {
			lastAbandoned = x + 1
		}
	}
	// Horizon: any H' that separates the abandoned holes from the pending ones
	// tells the sender the same; the smallest (L-K+1 unless a recent hole was
	// abandoned by time) has the shortest code.
	floor := r // r ≥ peerStart, so l+1-K below it is clamped like the window
	if l+1 >= c.reorderK()+floor {
		floor = l + 1 - c.reorderK()
	}
	h := max(floor, lastAbandoned)
	bw.gamma(h - floor + 1)
	bw.bits(delay, delayCodeBits)
	return l, c.firstMissing(), true
}

// ---- receive ----

// ReadHeader decodes a header from r and reconstructs the full sequence number
// and ack information against the current state. It changes no protocol state
// (only Stats rejection counters), so a security layer can authenticate the
// packet, with Seq as the nonce, before Accept commits it. On success r is
// positioned at the payload.
//
// Errors: ErrDuplicate, ErrStale, ErrTooFar, ErrBadType, ErrBadAck, or a
// *bitstream.ReadError for a truncated header. The returned Header carries Type
// and Seq whenever they were decoded.
func (c *Conn) ReadHeader(r *bitstream.Reader) (Header, error) {
	var h Header
	err := c.ReadHeaderInto(r, &h)
	return h, err
}

// ReadHeaderInto is ReadHeader decoding into h, for a caller that keeps a
// Header for every packet: a Header is 176 bytes, most of them the ack
// bitmap, and ReadHeader's zeroing, returning and Accept's copy of it
// were four moves of that much a packet. Every field is set except the
// bitmap past its first nbits bits, which nothing reads (readAck writes
// each word of those whole).
func (c *Conn) ReadHeaderInto(r *bitstream.Reader, h *Header) error {
	// Every field but bitmap: TestReadHeaderIntoSetsEveryField fails when
	// a new one is left out.
	h.Type, h.Seq = 0, 0
	h.valid, h.hasAck, h.allOK = false, false, false
	h.delay, h.nbits, h.ackL, h.ackH = 0, 0, 0, 0
	if v, k, ok := r.PeekWindow(); ok {
		var f shortHeader
		if parseShort(v, uint(k), &f) {
			return c.readShort(r, h, &f)
		}
	}
	return c.readHeaderFields(r, h)
}

// shortHeader is a header parsed from one window by parseShort.
type shortHeader struct {
	trunc, ackTrunc uint64
	w, ackW         uint // ackW 0: no ack section
	used            uint // the header's bits
	t               PacketType
	delay           uint8
}

// parseShort parses the common header — any sequence and ack width, every
// packet in the report range accepted (allOK) or no ack section — from
// the k ≤ 56 bits of v (bitstream.PeekWindow), with shifts and masks
// instead of a call per field (≈ 170 instructions a header, half of it
// calls). ok is false when the header is not of that form, or does not
// lie within v, or has the reserved type: readHeaderFields then reads it
// (and reports what is wrong). The same fields as readHeaderFields and
// readAck read, in the same order (FuzzShortHeader holds the two to the
// same result). It fills the caller's f (returned, its 48 bytes went
// through registers to the stack and were copied once more there).
func parseShort(v uint64, k uint, f *shortHeader) (ok bool) {
	f.t = PacketType(v & 3)
	if f.t == typeReserved {
		return false
	}
	n := uint(2)
	f.w = seqBits0
	if v>>n&1 != 0 {
		f.w = seqBits1
		if v>>(n+1)&1 != 0 {
			f.w = seqBits2
		}
		n++
	}
	n++
	f.trunc = v >> n & (1<<f.w - 1)
	n += f.w
	switch {
	case v>>n&1 == 0:
		f.ackW, n = ackBits0, n+1
	case v>>(n+1)&1 == 0:
		f.ackW, n = ackBits1, n+2
	case v>>(n+2)&1 == 0:
		f.ackW, n = ackBits2, n+3
	default:
		n += 3 // no ack section
	}
	if f.ackW != 0 {
		if n+f.ackW+1+delayCodeBits > k {
			return false
		}
		f.ackTrunc = v >> n & (1<<f.ackW - 1)
		n += f.ackW
		if v>>n&1 == 0 { // not allOK: holes to read
			return false
		}
		n++
		f.delay = uint8(v >> n & (1<<delayCodeBits - 1))
		n += delayCodeBits
	}
	f.used = n
	return n <= k
}

// readShort is readHeaderFields for a header parseShort read.
func (c *Conn) readShort(r *bitstream.Reader, h *Header, f *shortHeader) error {
	r.TryReadBits(f.used) // within the window parseShort read: it succeeds
	h.Type = f.t
	h.Seq = reconstructSeq(c.expected(), f.trunc, f.w)
	if err := c.classify(h.Seq); err != nil {
		c.countRejection(err)
		return err
	}
	if f.ackW != 0 {
		if err := c.ackFields(h, f.ackTrunc, f.ackW, true, 0, 0, f.delay, !c.hasRx() || h.Seq > c.rxL); err != nil {
			c.rareStats().BadHeader++
			return err
		}
	}
	h.valid = true
	return nil
}

// readHeaderFields is ReadHeaderInto field by field: every header.
func (c *Conn) readHeaderFields(r *bitstream.Reader, h *Header) error {
	br := bitReader{r: r}
	t := PacketType(br.bits(2, "notify.type"))
	if br.err == nil && t == typeReserved {
		c.rareStats().BadHeader++
		return ErrBadType
	}
	w := uint(seqBits0)
	if br.flag("notify.seqwidth") {
		w = seqBits1
		if br.flag("notify.seqwidth") {
			w = seqBits2
		}
	}
	trunc := br.bits(w, "notify.seq")
	if br.err != nil {
		c.rareStats().BadHeader++
		return br.err
	}
	h.Type = t
	h.Seq = reconstructSeq(c.expected(), trunc, w)
	if err := c.classify(h.Seq); err != nil {
		c.countRejection(err)
		return err
	}
	if err := c.readAck(&br, h, !c.hasRx() || h.Seq > c.rxL); err != nil {
		c.rareStats().BadHeader++
		return err
	}
	h.valid = true
	return nil
}

// readAck parses the ack section. Only the header of a packet newer than every
// packet accepted so far is reconstructed and validated: an older header
// carries nothing the newer one did not (ack bits only go 0→1, H only rises,
// everything below the newer report range is resolved), and its L cannot be
// reconstructed against the newer L. Its bits are still consumed so the reader
// lands on the payload.
func (c *Conn) readAck(br *bitReader, h *Header, newest bool) error {
	var w uint
	switch {
	case !br.flag("notify.ackwidth"):
		w = ackBits0
	case !br.flag("notify.ackwidth"):
		w = ackBits1
	case !br.flag("notify.ackwidth"):
		w = ackBits2
	}
	if br.err != nil || w == 0 {
		return br.err // no ack section
	}
	trunc := br.bits(w, "notify.ack")
	allOK := br.flag("notify.allok")
	var m, horizon uint64
	if !allOK {
		// Range [R, L-1] of m sequences, all accepted except the listed holes.
		m = br.gamma(c.ackWin()-1, "notify.acklen")
		holes := br.gamma(max(m, 1), "notify.holes")
		for i := uint64(0); i < m && br.err == nil; i += 64 {
			n := min(64, m-i)
			h.bitmap[i>>6] = ^uint64(0) >> (64 - n)
		}
		pos := uint64(0) // hole position counted from R-1
		for j := uint64(0); j < holes && br.err == nil; j++ {
			pos += br.gamma(m, "notify.hole")
			if pos > m {
				br.err = ErrBadAck
				break
			}
			i := m - pos // bitmap index of x = R-1+pos: L-1-x
			h.bitmap[i>>6] &^= 1 << (i & 63)
		}
		horizon = br.gamma(c.reorderK(), "notify.horizon") - 1
	}
	delay := uint8(br.bits(delayCodeBits, "notify.delay"))
	if br.err != nil {
		return br.err
	}
	return c.ackFields(h, trunc, w, allOK, m, horizon, delay, newest)
}

// ackFields reconstructs and validates a parsed ack section (the header of
// the newest packet only: see readAck) and sets h's ack fields.
func (c *Conn) ackFields(h *Header, trunc uint64, w uint, allOK bool, m, horizon uint64, delay uint8, newest bool) error {
	if !newest {
		return nil
	}
	ref := c.cfg.localStart
	if c.hasPeerL {
		ref = c.peerL
	}
	l := reconstructAck(ref, trunc, w)
	if l >= c.nextSeq || l-c.cfg.localStart < m {
		return ErrBadAck // acknowledges a packet never sent, or reaches below our first
	}
	var ackH uint64
	if !allOK {
		// H = max(R, L+1-K) + horizon, as the encoder computed it.
		r := l - m
		floor := r
		if l+1 >= c.reorderK()+floor {
			floor = l + 1 - c.reorderK()
		}
		if ackH = floor + horizon; ackH > l {
			return ErrBadAck
		}
	}
	h.hasAck = true
	h.allOK = allOK
	h.nbits = uint16(m)
	h.ackL = l
	h.ackH = ackH
	h.delay = delay
	return nil
}

// Accept commits a header ReadHeader returned: marks the sequence received,
// processes the ack section (resolving our packets' fates) and takes an RTT
// sample. It re-checks duplicates and staleness, so accepting the same header
// twice, or headers in any order, is safe.
func (c *Conn) Accept(h Header, now time.Duration) error { return c.AcceptHeader(&h, now) }

// AcceptHeader is Accept of a header ReadHeaderInto decoded, without a
// copy of it.
func (c *Conn) AcceptHeader(h *Header, now time.Duration) error {
	if !h.valid {
		c.rareStats().BadHeader++
		return ErrNotDecoded
	}
	if err := c.classify(h.Seq); err != nil {
		c.countRejection(err)
		return err
	}
	newest := !c.hasRx() || h.Seq > c.rxL
	c.receive(h.Seq, now)
	if h.hasAck && newest && h.ackL < c.nextSeq {
		c.onAck(h, now)
	}
	return nil
}

// expected is the sequence the receiver expects next: the reference for
// reconstructing a truncated sequence number.
func (c *Conn) expected() uint64 {
	if c.hasRx() {
		return c.rxL + 1
	}
	return c.cfg.peerStart
}

// classify decides acceptance of the peer's sequence s without changing state.
func (c *Conn) classify(s uint64) error {
	if !c.hasRx() {
		switch {
		case s < c.cfg.peerStart:
			return ErrStale
		case c.far(s) && !c.cfg.AcceptFar:
			return ErrTooFar
		}
		return nil
	}
	switch {
	case s > c.rxL:
		if c.far(s) && !c.cfg.AcceptFar {
			return ErrTooFar
		}
		return nil
	case s+c.ackWin() > c.rxL && c.accepted(s):
		return ErrDuplicate
	case s < c.rxH():
		return ErrStale
	}
	return nil
}

// far reports whether s, newer than every sequence accepted, lies beyond
// the window: more than AckWindow past the newest, or, before the first,
// at or past peerStart + AckWindow.
func (c *Conn) far(s uint64) bool {
	if !c.hasRx() {
		return s-c.cfg.peerStart >= c.ackWin()
	}
	return s-c.rxL > c.ackWin()
}

func (c *Conn) countRejection(err error) {
	switch err {
	case ErrDuplicate:
		c.rareStats().Duplicates++
	case ErrStale:
		c.rareStats().Stale++
	case ErrTooFar:
		c.rareStats().TooFar++
	}
}

func (c *Conn) accepted(s uint64) bool {
	return c.rxBits[(s&c.rxMask())>>6]>>(s&63)&1 == 1
}

func (c *Conn) setAccepted(s uint64) {
	c.rxBits[(s&c.rxMask())>>6] |= 1 << (s & 63)
}

func (c *Conn) clearAccepted(s uint64) {
	c.rxBits[(s&c.rxMask())>>6] &^= 1 << (s & 63)
}

// missing counts the sequences in [lo, hi) not accepted; hi ≤ rxL+1.
// A word of the ring at a time (the ring is a whole number of words, so
// seq mod 64 is the bit in its word): the range is up to AckWindow long
// and every header written and packet received counts one.
func (c *Conn) missing(lo, hi uint64) uint64 {
	if lo >= hi {
		return 0 // an empty report range: a peer that confirmed everything
	}
	mask := c.rxMask()
	if k := hi - lo; k <= 64 {
		// At most 64 sequences (nearly every call: a header's report
		// range is what the peer has not confirmed, a round trip's worth):
		// the bits of [lo, lo+64) from lo's word and the next, which differ
		// (the ring is at least four words), in one word; no loop.
		off := lo & 63
		w := c.rxBits[(lo&mask)>>6] >> off
		if off != 0 {
			w |= c.rxBits[((lo+64)&mask)>>6] << (64 - off)
		}
		w = ^w
		if k < 64 {
			w &= 1<<k - 1
		}
		return uint64(bits.OnesCount64(w))
	}
	var n uint64
	for s := lo; s < hi; {
		off := s & 63
		k := min(64-off, hi-s) // bits of [s, hi) in s's word
		w := ^c.rxBits[(s&mask)>>6] >> off
		if k < 64 {
			w &= 1<<k - 1
		}
		n += uint64(bits.OnesCount64(w))
		s += k
	}
	return n
}

// nextMissing is the lowest sequence in [lo, hi) not accepted, or hi; a
// word at a time, as missing.
func (c *Conn) nextMissing(lo, hi uint64) uint64 {
	mask := c.rxMask()
	for s := lo; s < hi; s += 64 - s&63 {
		if w := ^c.rxBits[(s&mask)>>6] >> (s & 63); w != 0 {
			return min(s+uint64(bits.TrailingZeros64(w)), hi)
		}
	}
	return hi
}

// firstMissing is F: the lowest sequence ≥ H not accepted, or L+1. Once the
// peer processes a header carrying F, every sequence below F is resolved there.
func (c *Conn) firstMissing() uint64 {
	if !c.gapOpen {
		return c.rxL + 1 // every sequence in [H, L] accepted
	}
	return c.nextMissing(c.rxH(), c.rxL+1)
}

// receive marks s (already classified acceptable) as accepted.
func (c *Conn) receive(s uint64, now time.Duration) {
	hasRx := c.hasRx()
	if hasRx && s <= c.rxL {
		c.setAccepted(s) // a reordered packet fills a gap
		return
	}
	// s is the new newest. Packet threshold: everything below s−K+1 is
	// given up, so H becomes max(H, s+1−K) = s − back, back the smaller
	// of s − H and K−1 (s ≥ H; where s+1−K would be below 0, s − H ≤ s
	// < K−1 keeps H).
	oldH := c.cfg.peerStart // the horizon before the first packet
	if hasRx {
		oldH = c.rxH()
	}
	back := min(s-oldH, c.reorderK()-1)
	newH := s - back
	gapFrom := c.cfg.peerStart // first sequence that becomes missing behind s
	// Past the window: classify let it through only with AcceptFar.
	if c.far(s) {
		c.rareStats().FarAccepted++
	}
	if hasRx {
		oldL := c.rxL
		gapFrom = oldL + 1
		// Count before the ring slots are reused. Nothing above oldL was
		// accepted: a jump past the window (AcceptFar) counts the old
		// window, no more.
		evictLo := max(windowLow(oldL, c.ackWin(), c.cfg.peerStart), c.confirmedF())
		evictHi := min(windowLow(s, c.ackWin(), c.cfg.peerStart), oldL+1)
		for x := evictLo; x < evictHi; x++ {
			if c.accepted(x) {
				c.rareStats().WindowEvicted++
			}
		}
		if c.gapOpen { // else [rxH, oldL] are all accepted: none to count
			c.stats.Abandoned += c.missing(oldH, min(newH, gapFrom))
		}
		// Per sequence: the division (tens of cycles) only when sequences
		// were skipped, not for the next one (nearly every packet).
		per := now - c.rxLAt
		if k := s - oldL; k > 1 {
			per /= time.Duration(k)
		}
		if per = max(per, 0); c.interval == noInterval {
			c.interval = per
		} else {
			c.interval += (per - c.interval) / 8
		}
		// The slots up to s are reused (s's own is set below): the
		// whole ring when s jumped a ring's length or more (AcceptFar),
		// so the work stays bounded whatever the jump.
		if s-gapFrom > c.rxMask() {
			clear(c.rxBits)
		} else {
			for x := gapFrom; x < s; x++ {
				c.clearAccepted(x)
			}
		}
	}
	if newH > gapFrom {
		c.stats.Abandoned += newH - gapFrom
	}
	if x := max(newH, gapFrom); x < s { // a gap opened (most packets arrive in order: none)
		if cap(c.rxBits) == len(c.rxBits) {
			c.growGaps()
		}
		gaps, mask := c.gaps(), c.gapMask()
		for ; x < s; x++ {
			gaps[x&mask] = uint64(now)
		}
		c.gapOpen = true
	}
	c.setAccepted(s)
	c.rxL = s
	c.rxHBack = uint8(back)
	c.rxLAt = now
}

// Tick runs the receiver's time threshold (QUIC time-threshold loss detection,
// done by the receiver so both ends agree): a missing sequence below L is
// abandoned once the first packet after it arrived reorderTime() ago. Call it
// every frame; it is O(K). The threshold is armed once the inter-arrival time
// has a sample (two packets with rising sequence numbers arrived): before that
// the sender's rate is unknown and only the packet threshold applies.
func (c *Conn) Tick(now time.Duration) {
	if !c.gapOpen || !c.hasRx() || c.interval == noInterval || c.rxHBack == 0 {
		return
	}
	rxH := c.rxH()
	s := c.nextMissing(rxH, c.rxL)
	if s == c.rxL {
		c.gapOpen = false // no gap: nothing to give up, nor later until one opens
		return
	}
	tau := c.reorderTime()
	newH := rxH
	gaps, mask := c.gaps(), c.gapMask()
	for ; s < c.rxL; s = c.nextMissing(s+1, c.rxL) {
		if now-time.Duration(gaps[s&mask]) < tau {
			break // gap times rise with s: nothing later is due either
		}
		newH = s + 1
	}
	c.stats.Abandoned += c.missing(rxH, newH)
	c.rxHBack = uint8(c.rxL - newH)
}

// reorderTime is how long a gap may stay open: long enough that a packet
// displaced by K−1 slots (K·interval) is never given up by time, at least
// MinReorderTime, and at least srtt/8 (RFC 9002's 9/8·RTT time threshold is a
// sender-side analogue; here only reordering, not the round trip, is waited for).
func (c *Conn) reorderTime() time.Duration {
	tau := max(c.cfg.MinReorderTime, c.interval*time.Duration(5*c.reorderK())/4)
	return max(tau, c.rtt.srtt/8)
}

// ---- ack processing ----

// onAck applies the ack section of the newest header: resolves our in-flight
// packets and takes an RTT sample when L is new.
func (c *Conn) onAck(h *Header, now time.Duration) {
	l := h.ackL
	if !c.hasPeerL || l > c.peerL {
		if h.delay != delayNone && c.nextSeq-l <= c.inRing() { // l ≥ headSeq (l < nextSeq)
			if raw := now - c.recs[l&c.recMask()].sentAt; raw > 0 {
				c.rtt.sample(raw, delayValue(h.delay))
				c.rttSamples++
			}
		}
		c.peerL, c.hasPeerL = l, true
	}
	lowWin := windowLow(l, c.ackWin(), c.cfg.localStart)
	r := l - uint64(h.nbits)
	for s := c.seqOf(c.firstPendingLo); s <= l; s++ {
		rec := &c.recs[s&c.recMask()]
		if rec.state != recPending {
			continue
		}
		switch {
		case s < lowWin:
			c.drop(rec) // left the peer's window unreported
		case s == l || h.allOK:
			c.deliver(rec)
		case s < r:
			// The peer says s is resolved here, yet it is not: only a broken or
			// forged peer does that. Never infer "delivered" without a bit.
			c.drop(rec)
		case h.bitmapBit(l - 1 - s):
			c.deliver(rec)
		case s < h.ackH:
			c.drop(rec) // abandoned by the peer: it will never accept s
		}
	}
	c.skipResolved()
}

// deliver and drop record one fate (two functions, each inlined where
// onAck resolves a record). A delivered packet's header was processed by
// the peer (or a newer one was), so what it carried is confirmed:
// ack-of-ack.
func (c *Conn) deliver(r *record) {
	r.state = recDelivered
	c.stats.Delivered++
	c.lossRate -= c.lossRate / 32
	if r.acked {
		l := c.carried(r)
		f := max(c.confirmedF(), l+1-uint64(r.fBack))
		c.confirmedL = max(c.confirmedL, l)
		c.confirmedFBack = uint8(c.confirmedL + 1 - f)
	}
}

func (c *Conn) drop(r *record) {
	r.state = recDropped
	c.lossRate += (1 - c.lossRate) / 32
}

func (c *Conn) skipResolved() {
	s, end := c.firstPendingLo, uint32(c.nextSeq)
	for s != end && c.recs[uint64(s)&c.recMask()].state != recPending {
		s++
	}
	c.firstPendingLo = s
}

// PopFates appends the fates resolved since the last call to dst, strictly in
// send order, each sequence number exactly once, and returns the extended
// slice. A resolved packet waits behind an older unresolved one. Appending to a
// slice with spare capacity does not allocate.
func (c *Conn) PopFates(dst []Fate) []Fate {
	s := c.seqOf(c.headLo)
	for s < c.nextSeq {
		r := &c.recs[s&c.recMask()]
		if r.state == recPending {
			break
		}
		dst = append(dst, Fate{Seq: s, Delivered: r.state == recDelivered, SentAt: r.sentAt})
		s++
	}
	c.headLo = uint32(s)
	return dst
}

// ForcedAny reports whether WriteHeader ever force-dropped a record (a
// fate resolved without an ack). Records are otherwise resolved only by
// AcceptHeader: a caller that pops every fate after each AcceptHeader finds
// none waiting when this is false, and may skip the pop (a Server's Poll:
// the pop would read the record ring's oldest entry, a line the send does
// not need). It reads the word Tick reads.
func (c *Conn) ForcedAny() bool { return c.rare != nil && c.rare.ForcedDrops != 0 }

// PopFate pops the oldest resolved fate, as PopFates does one at a time:
// a caller that handles each at once needs no slice to collect them in.
func (c *Conn) PopFate() (Fate, bool) {
	if c.headLo == uint32(c.nextSeq) {
		return Fate{}, false
	}
	r := &c.recs[uint64(c.headLo)&c.recMask()]
	if r.state == recPending {
		return Fate{}, false
	}
	f := Fate{Seq: c.seqOf(c.headLo), Delivered: r.state == recDelivered, SentAt: r.sentAt}
	c.headLo++
	return f, true
}

// ---- accessors ----

// Delivered reports whether our packet seq is known delivered though its
// fate has not been popped yet, and when it was sent. Fates pop in send
// order, so one lost packet holds back the delivered fates of every packet
// sent after it until the peer gives it up — K packets and an ack's trip
// later. A layer that can act on a delivery out of order (a ghost table
// confirming state the client holds) asks here instead of waiting. False for
// a packet unresolved, dropped, or already popped.
func (c *Conn) Delivered(seq uint64) (sentAt time.Duration, ok bool) {
	if seq >= c.nextSeq || c.nextSeq-seq > c.inRing() { // not in [headSeq, nextSeq)
		return 0, false
	}
	r := &c.recs[seq&c.recMask()]
	return r.sentAt, r.state == recDelivered
}

// NextSeq is the sequence number the next WriteHeader will use.
func (c *Conn) NextSeq() uint64 { return c.nextSeq }

// Newest is the newest peer sequence number accepted, and whether one was.
func (c *Conn) Newest() (uint64, bool) { return c.rxL, c.hasRx() }

// InFlight is the number of our packets whose fate is unresolved, counted
// from the records from firstPending on (at most MaxInFlight; a count
// kept a send and a fate was 8 bytes of every Conn and two writes a
// packet, for a figure only Stats and tests read).
func (c *Conn) InFlight() int {
	n := 0
	for s, end := c.firstPendingLo, uint32(c.nextSeq); s != end; s++ {
		if c.recs[uint64(s)&c.recMask()].state == recPending {
			n++
		}
	}
	return n
}

// RTT is the smoothed round-trip time (InitialRTT before the first sample).
func (c *Conn) RTT() time.Duration { return c.rtt.srtt }

// RTTVar is the RTT variation (InitialRTT/2 before the first sample).
func (c *Conn) RTTVar() time.Duration { return c.rtt.rttvar }

// Jitter is the smoothed difference between consecutive RTT samples (RFC 3550 style).
func (c *Conn) Jitter() time.Duration { return c.rtt.jitter }

// LossRate is an exponentially weighted (α = 1/32) fraction of our packets
// resolved dropped; Stats gives the exact totals.
func (c *Conn) LossRate() float64 { return c.lossRate }

// Stats returns the counters so far. It counts the records in flight
// (InFlight) and derives Received: O(records in flight), for a caller
// that reads it now and then (a connection folds it once a second).
func (c *Conn) Stats() Stats {
	var st Stats
	if r := c.rare; r != nil {
		st.ForcedDrops, st.Duplicates, st.Stale = r.ForcedDrops, r.Duplicates, r.Stale
		st.TooFar, st.BadHeader, st.WindowEvicted = r.TooFar, r.BadHeader, r.WindowEvicted
		st.FarAccepted = r.FarAccepted
	}
	cs := &c.stats
	st.Sent = c.nextSeq - c.cfg.localStart // every header written took one sequence number
	st.Delivered, st.HeaderBits, st.RTTSamples = cs.Delivered, cs.HeaderBits, uint64(c.rttSamples)
	st.Dropped = st.Sent - uint64(c.InFlight()) - cs.Delivered // every record taken is pending or resolved (resolve) one way
	st.Received, st.Abandoned = c.received(), cs.Abandoned
	return st
}

// received counts the peer's packets accepted: every sequence from
// peerStart to rxL was accepted, or given up (Abandoned: only a sequence
// never accepted is, and one below H is never accepted after), or is
// still missing at or above H. A count kept a packet was 4 bytes of
// every Conn.
func (c *Conn) received() uint64 {
	if !c.hasRx() {
		return 0
	}
	n := c.rxL + 1 - c.cfg.peerStart - c.stats.Abandoned
	if c.gapOpen { // else none is missing
		n -= c.missing(c.rxH(), c.rxL)
	}
	return n
}

// connStats are the 64-bit counters of Stats that count every packet
// (Sent is the sequence numbers taken: nextSeq − localStart; Dropped is
// what of them is neither pending nor delivered; Received is derived:
// received; RTTSamples is the Conn's rttSamples).
type connStats struct {
	Delivered, HeaderBits, Abandoned uint64
}

// rareState holds what a healthy, short link never needs: the counters
// that stay 0 on it (rejections, forced drops, window evictions) and the
// sender ring's sizing period while the ring is larger than minRecs
// (WriteHeader, trimRecs), made on the first: 60 bytes of every Conn otherwise. A
// peer's garbage makes it once, no more.
type rareState struct {
	ForcedDrops, Duplicates, Stale, TooFar, BadHeader, WindowEvicted uint64
	FarAccepted                                                      uint64
	// recTrimAt is when the sizing period ends; recPeak and recPeakPrev
	// the most records in flight in it and the one before.
	recTrimAt            time.Duration
	recPeak, recPeakPrev uint32
}

func (c *Conn) rareStats() *rareState {
	if c.rare == nil {
		c.rare = new(rareState)
	}
	return c.rare
}
