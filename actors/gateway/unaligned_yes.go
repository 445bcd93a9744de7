//go:build amd64 || arm64 || 386 || ppc64le || s390x

package gateway

// unalignedWordsOK: this architecture loads a 64-bit word from any
// address (idKey reads a connection id's bytes as one word in place).
const unalignedWordsOK = true
