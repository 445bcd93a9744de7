# ghostwire — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
PKGS := ./...
FUZZTIME ?= 30s
BENCHTIME ?= 1s
COUNT ?= 1

.PHONY: help test vet race scale loadtest fuzz-seeds bench-smoke verify bench fuzz generate

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: vet race scale fuzz-seeds bench-smoke ## the README's test command: vet, race tests, full-scale load tests, fuzz seed corpora, every benchmark once

vet: ## go vet
	$(GO) vet $(PKGS)

race: ## all tests with the race detector, in shuffled order
	$(GO) test -race -shuffle=on -timeout 20m $(PKGS)

scale: ## load tests at full scale without the race detector (under -race they scale down)
	$(GO) test -count=1 -run 'TestTwoHundredClients|TestClusterThreeNodes' ./actors/...

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

# The headline load test: a local zoned and botswarm on the same machine. Reports land in
# $(LOADTEST_DIR) (JSON + self-contained HTML); the exit status is botswarm's (1: an SLO
# target missed or an invariant violated, named on stdout).
LOADTEST_BOTS ?= 750
LOADTEST_DURATION ?= 60s
LOADTEST_SCENARIO ?= wander
LOADTEST_FLAGS ?=
LOADTEST_SLO ?= rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m
LOADTEST_DIR ?= loadtest-out
LOADTEST_UDP ?= 127.0.0.1:7777

loadtest: ## headline load test: zoned + botswarm here (LOADTEST_BOTS, LOADTEST_DURATION, LOADTEST_SLO)
	@mkdir -p $(LOADTEST_DIR)
	$(GO) build -o $(LOADTEST_DIR)/zoned ./cmd/zoned
	$(GO) build -o $(LOADTEST_DIR)/botswarm ./cmd/botswarm
	@set -e; \
	  $(LOADTEST_DIR)/zoned --data $(LOADTEST_DIR)/data --udp $(LOADTEST_UDP) --http 127.0.0.1:0 --nats-listen 127.0.0.1:0 \
	    > $(LOADTEST_DIR)/zoned.log 2>&1 & zpid=$$!; \
	  trap 'kill -TERM $$zpid 2>/dev/null; wait $$zpid 2>/dev/null || true' EXIT; \
	  for i in $$(seq 100); do grep -q 'zoned ready' $(LOADTEST_DIR)/zoned.log && break; sleep 0.1; done; \
	  $(LOADTEST_DIR)/botswarm --server $(LOADTEST_UDP) --key-file $(LOADTEST_DIR)/data/token.key \
	    --bots $(LOADTEST_BOTS) --ramp 100 --duration $(LOADTEST_DURATION) --scenario $(LOADTEST_SCENARIO) \
	    --report $(LOADTEST_DIR)/report.json --html $(LOADTEST_DIR)/report.html \
	    --slo '$(LOADTEST_SLO)' $(LOADTEST_FLAGS)
