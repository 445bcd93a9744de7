package handshake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"net/netip"
	"time"
)

const (
	cookieMACSize = 16
	// cookieSize is the cookie field of a connect request: epoch and MAC.
	cookieSize = 8 + cookieMACSize
)

// Cookie is the server's stateless proof that a client receives packets at its
// source address: a MAC over that address, the token id and the rotation epoch
// it was minted in, under a secret only the server knows (the WireGuard cookie
// idea; GameNetworkingSockets' challenge). Minting and checking it allocates
// nothing on the server.
type Cookie struct {
	Epoch uint64
	MAC   [cookieMACSize]byte
}

// cookieJar mints and checks cookies under a secret rotated every rotation
// period: a cookie verifies in the epoch it was minted in and the next, so it
// lives between one and two periods. Secrets come from the injected
// randomness; rotation happens lazily when now crosses an epoch boundary.
// Not safe for concurrent use.
type cookieJar struct {
	rotation time.Duration
	rand     io.Reader
	epoch    uint64 // current epoch; secrets exist once init
	init     bool
	prevOK   bool // mac[1] holds epoch-1's secret
	mac      [2]hash.Hash
	msg      [len(labelCookie) + 8 + addrSize + TokenIDSize]byte
	sum      [sha256.Size]byte
}

func (j *cookieJar) epochAt(now time.Time) uint64 {
	ns := now.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns) / uint64(j.rotation)
}

// rotate brings the secrets up to now's epoch. A clock that steps back keeps
// the newest epoch: a secret is never reinstated.
func (j *cookieJar) rotate(now time.Time) error {
	e := j.epochAt(now)
	switch {
	case j.init && e <= j.epoch:
		return nil
	case j.init && e == j.epoch+1:
		j.mac[0], j.mac[1] = j.mac[1], j.mac[0]
		j.prevOK = true
	default:
		j.prevOK = false
	}
	var secret [KeySize]byte
	defer clear(secret[:])
	if _, err := io.ReadFull(j.rand, secret[:]); err != nil {
		return fmt.Errorf("%w: cookie secret: %v", ErrRand, err)
	}
	j.mac[0] = hmac.New(sha256.New, secret[:])
	j.epoch, j.init = e, true
	return nil
}

// compute writes the MAC of (epoch, addr, id) under the secret of slot into out.
func (j *cookieJar) compute(out *[cookieMACSize]byte, slot int, epoch uint64, addr netip.AddrPort, id *TokenID) {
	n := copy(j.msg[:], labelCookie)
	binary.LittleEndian.PutUint64(j.msg[n:], epoch)
	n += 8
	putAddr(j.msg[n:], addr)
	n += addrSize
	copy(j.msg[n:], id[:])
	m := j.mac[slot]
	m.Reset()
	m.Write(j.msg[:])
	copy(out[:], m.Sum(j.sum[:0]))
}

// mint returns a cookie for (addr, id) in the current epoch.
func (j *cookieJar) mint(now time.Time, addr netip.AddrPort, id *TokenID) (Cookie, error) {
	if err := j.rotate(now); err != nil {
		return Cookie{}, err
	}
	c := Cookie{Epoch: j.epoch}
	j.compute(&c.MAC, 0, j.epoch, addr, id)
	return c, nil
}

// verify reports whether c was minted for (addr, id) in the current or the
// previous epoch. Any other epoch is refused without computing a MAC; the MAC
// comparison is constant-time (checklist SEC-13).
func (j *cookieJar) verify(now time.Time, c *Cookie, addr netip.AddrPort, id *TokenID) (bool, error) {
	if err := j.rotate(now); err != nil {
		return false, err
	}
	slot := 0
	switch {
	case c.Epoch == j.epoch:
	case j.prevOK && c.Epoch+1 == j.epoch:
		slot = 1
	default:
		return false, nil
	}
	var want [cookieMACSize]byte
	j.compute(&want, slot, c.Epoch, addr, id)
	return hmac.Equal(want[:], c.MAC[:]), nil
}
