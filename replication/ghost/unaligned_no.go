//go:build !(amd64 || arm64 || 386 || ppc64le || s390x)

package ghost

// unalignedWordsOK: on this architecture a 64-bit load from a 4-byte
// boundary may trap, so refsBelow reads its references one at a time.
const unalignedWordsOK = false
