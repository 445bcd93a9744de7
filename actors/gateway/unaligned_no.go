//go:build !(amd64 || arm64 || 386 || ppc64le || s390x)

package gateway

// unalignedWordsOK: on this architecture an unaligned 64-bit load may
// trap, so idKey assembles a connection id's word from its bytes.
const unalignedWordsOK = false
