//go:build amd64 || arm64 || 386 || ppc64le || s390x

package ghost

// unalignedWordsOK: this architecture loads a 64-bit word from any 4-byte
// boundary (refsBelow reads a view's 4-byte references two to a word, and
// a view may start at any reference of a snapshot's array).
const unalignedWordsOK = true
