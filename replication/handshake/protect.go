package handshake

import (
	"github.com/ghostwire/ghostwire/replication/internal/freelist"

	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// Direction is the direction a key protects; it is the first nonce byte, so a
// packet reflected back to its sender can never verify even if both
// directions shared a key.
type Direction uint8

const (
	ClientToServer Direction = 0
	ServerToClient Direction = 1
)

func (d Direction) String() string {
	if d == ClientToServer {
		return "client→server"
	}
	return "server→client"
}

// Nonce domains: the second nonce byte, so packets and the Accepted tag never
// share a nonce under one key.
const (
	domainPacket   = 0 // data packets and Disconnect: bytes 4..11 = sequence number
	domainAccepted = 1 // the Accepted tag: bytes 4..11 = connection id
)

// MaxHeaderSize bounds the cleartext header Seal and Open authenticate.
const MaxHeaderSize = MaxPacketSize - TagSize

// Protector is the AEAD of one direction of one session: ChaCha20-Poly1305
// under that direction's session key. The 96-bit nonce is
//
//	[direction][domain 0][0][0][sequence number, 64-bit little-endian]
//
// and the associated data is the connection id followed by the packet's
// cleartext header, so the tag covers everything on the wire except the
// optional routing prefix (which repeats the connection id).
//
// The sending side refuses to seal a sequence number not above the last one it
// sealed: with one Protector per session key (the replay guard grants each
// token one session, and the session keys also depend on the connection id)
// no nonce is ever used twice. The receiving side keeps no state; pair it with
// a ReplayWindow (Session does).
//
// The zero Protector is not usable; call NewProtector. Not safe for concurrent
// use; the connection actor owns it.
//
// The associated data is built in place: the connection id sits at the
// front of the scratch's ad from the start, so a packet copies only its
// header behind it. (It was a separate buffer the id was copied into for
// every packet: one more cold cache line per packet on a server, where a
// connection's state is cold by the time its next packet comes.) The
// nonce and the associated data live in a protectScratch: a Protector's
// own, or for a Session the caller's (Scratch: shared by the sessions one
// goroutine runs), handed to each call with the connection id it copies
// in front. A scratch in every Session was 36 bytes of it (the 288-byte
// size class; 256 without), one in each direction 16 more.
type Protector struct {
	k  protector
	id ConnID
	sc protectScratch
}

// protector is a Protector without its scratch: a Session keeps two and
// one scratch.
type protector struct {
	aead   cipher.AEAD
	last   uint64 // the last sealed sequence number
	dir    Direction
	sealed bool // a sequence number was sealed
}

// protectScratch is where a Protector builds a packet's nonce and
// associated data; nothing in it lasts beyond a call.
type protectScratch struct {
	nonce [chacha20poly1305.NonceSize]byte
	ad    [ConnIDSize + adInline]byte // id ‖ header, for headers up to adInline
}

// Scratch is where a Session builds a packet's nonce and associated data
// (SealWith, OpenWith): 36 bytes used only within a call, so the sessions
// one goroutine runs — a connection shard's — share one instead of each
// keeping its own. The zero Scratch is ready to use. Not safe for
// concurrent use.
type Scratch struct{ sc protectScratch }

// scratches: the Scratch of a Session call that brings none (Seal, Open, the
// Disconnect and Redirect packets), as many as such calls ever ran at
// once, at most 64 kept.
var scratches = freelist.List[Scratch]{Max: 64}

// adInline is the longest header whose associated data is built in the
// scratch: the notify header of a data packet is 4–14 bytes, the control
// packets' headers 9. (32 until the Session went to the 288-byte size
// class: the 16 bytes no header used.)
const adInline = 16

// NewProtector returns the Protector of direction dir of session id under key.
func NewProtector(key [KeySize]byte, id ConnID, dir Direction) (*Protector, error) {
	p := &Protector{id: id}
	if err := p.k.init(key, dir); err != nil {
		return nil, err
	}
	return p, nil
}

// init sets p up for direction dir under key.
func (p *protector) init(key [KeySize]byte, dir Direction) error {
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return err
	}
	if dir > ServerToClient {
		return fmt.Errorf("%w: direction %d", ErrConfig, dir)
	}
	*p = protector{aead: aead, dir: dir}
	return nil
}

// ID is the connection id the Protector authenticates.
func (p *Protector) ID() ConnID { return p.id }

// NextSeq is the lowest sequence number Seal accepts.
func (p *Protector) NextSeq() uint64 { return p.k.nextSeq() }

func (p *protector) nextSeq() uint64 {
	if !p.sealed {
		return 0
	}
	return p.last + 1 // wraps to 0 only after sealing 2^64−1; Seal then refuses everything
}

// setupPacket sets the nonce for seq in direction dir and returns the
// associated data: id ‖ header. The scratch may have served another
// direction or connection since.
func setupPacket(dir Direction, sc *protectScratch, id *ConnID, header []byte, seq uint64) ([]byte, error) {
	if len(header) > MaxHeaderSize {
		return nil, ErrTooLarge
	}
	binary.LittleEndian.PutUint32(sc.nonce[:4], uint32(dir)|domainPacket<<8) // bytes 2 and 3 zero
	binary.LittleEndian.PutUint64(sc.nonce[4:], seq)
	*(*ConnID)(sc.ad[:ConnIDSize]) = *id
	if len(header) <= adInline {
		return sc.ad[:ConnIDSize+copy(sc.ad[ConnIDSize:], header)], nil
	}
	// A longer header (none in this protocol's packets) gets its own
	// buffer: a spare slice kept for it was 24 bytes of every Protector.
	return append(append(make([]byte, 0, ConnIDSize+len(header)), sc.ad[:ConnIDSize]...), header...), nil
}

// Seal appends payload encrypted and the 16-byte tag to dst and returns the
// extended slice; header is authenticated, not encrypted (it stays readable:
// the notify header that carries the truncated sequence number). seq must be
// above every sequence number sealed before (ErrSeqReuse otherwise; nothing is
// written). To encrypt in place pass payload's storage as dst[len(dst):]; any
// other overlap of the output with payload is a caller bug (as in
// cipher.AEAD). 0 allocations when dst has room.
func (p *Protector) Seal(dst, header, payload []byte, seq uint64) ([]byte, error) {
	return p.k.seal(&p.sc, &p.id, dst, header, payload, seq)
}

func (p *protector) seal(sc *protectScratch, id *ConnID, dst, header, payload []byte, seq uint64) ([]byte, error) {
	if p.sealed && seq <= p.last {
		return dst, ErrSeqReuse
	}
	if len(header)+len(payload)+TagSize > MaxPacketSize {
		return dst, ErrTooLarge
	}
	ad, err := setupPacket(p.dir, sc, id, header, seq)
	if err != nil {
		return dst, err
	}
	p.sealed, p.last = true, seq
	return p.aead.Seal(dst, sc.nonce[:], payload, ad), nil
}

// Open authenticates header and ciphertext (payload ‖ tag) as packet seq of
// this direction and appends the payload to dst. It changes no state: check
// the sequence against a ReplayWindow before, and commit it after, a
// successful Open. Any bit changed anywhere in header, ciphertext, tag,
// sequence number or connection id gives ErrAuth. dst may be ciphertext[:0].
func (p *Protector) Open(dst, header, ciphertext []byte, seq uint64) ([]byte, error) {
	return p.k.open(&p.sc, &p.id, dst, header, ciphertext, seq)
}

func (p *protector) open(sc *protectScratch, id *ConnID, dst, header, ciphertext []byte, seq uint64) ([]byte, error) {
	return openPacket(p.aead, p.dir, sc, id, dst, header, ciphertext, seq)
}

// openPacket is open for the receiving direction dir under aead: the
// receiving side keeps no state of its own (a Session keeps only its AEAD).
func openPacket(aead cipher.AEAD, dir Direction, sc *protectScratch, id *ConnID, dst, header, ciphertext []byte, seq uint64) ([]byte, error) {
	if len(ciphertext) < TagSize {
		return dst, ErrAuth
	}
	ad, err := setupPacket(dir, sc, id, header, seq)
	if err != nil {
		return dst, err
	}
	out, err := aead.Open(dst, sc.nonce[:], ciphertext, ad)
	if err != nil {
		return dst, ErrAuth
	}
	return out, nil
}
