package session

import "flag"

// genSeeds regenerates the committed fuzz seed corpora:
//
//	go test ./replication/session -run GenerateFuzzSeeds -gen-seeds
var genSeeds = flag.Bool("gen-seeds", false, "rewrite testdata/fuzz seed corpora")

// GenSeeds reports whether -gen-seeds was given (for the external tests).
func GenSeeds() bool { return *genSeeds }
