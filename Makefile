# ghostwire — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
PKGS := ./...
FUZZTIME ?= 30s
BENCHTIME ?= 1s
COUNT ?= 1

.PHONY: help test vet race scale fuzz-seeds bench-smoke verify bench fuzz generate

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: vet race scale fuzz-seeds bench-smoke ## the README's test command: vet, race tests, full-scale load tests, fuzz seed corpora, every benchmark once

vet: ## go vet
	$(GO) vet $(PKGS)

race: ## all tests with the race detector, in shuffled order
	$(GO) test -race -shuffle=on -timeout 20m $(PKGS)

scale: ## load tests at full scale without the race detector (under -race they scale down)
	$(GO) test -count=1 -run 'TestTwoHundredClients' ./actors/...

fuzz-seeds: ## run every fuzz target over its committed seed corpus only
	$(GO) test -run '^Fuzz' -count=1 $(PKGS)

bench-smoke: ## every benchmark once (-benchtime=1x), to keep them compiling and running
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m $(PKGS)

verify: ## gofmt, vet, staticcheck, go mod tidy -diff, generated code up to date
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) mod tidy -diff
	$(GO) generate ./... && git diff --exit-code -- '*.pb.go'

bench: ## benchmarks with memory stats (BENCHTIME, COUNT)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS)

fuzz: ## fuzz every target for FUZZTIME each (default 30s)
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

generate: ## regenerate *.pb.go and other generated code
	$(GO) generate ./...
