# ghostwire — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
PKGS := ./...
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 2s
BENCHTIME ?= 1s
COUNT ?= 1

.PHONY: help test vet race scale loadtest cluster chaos chaos-nats chaos-nats-cluster chaos-pause capacity fuzz-seeds bench-smoke deploy-check verify bench fuzz generate peers

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: verify race scale fuzz-seeds bench-smoke deploy-check ## the README's test command: verify (gofmt, vet, staticcheck, generated code), race tests, full-scale load tests, fuzz seed corpora, every benchmark once, the deployment's contract

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

# The Kubernetes manifests' contract (deploy/README.md, "Local stand-in and proof"): renders every
# kustomization under deploy/k8s, decodes it strictly into the API types, and runs the real zoned
# and nats-server with the manifests' arguments and config. deploy/ is a module of its own, so the
# product's go.mod stays free of Kubernetes; a few seconds once its modules are downloaded.
deploy-check: ## the deployment's contract: render deploy/k8s, decode strictly, run zoned and NATS as the manifests configure them
	cd deploy && $(GO) test -count=1 ./...

verify: ## gofmt, vet, staticcheck, go mod tidy -diff, generated code (protobuf, docs/vectors) up to date
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) mod tidy -diff
	cd deploy && $(GO) vet ./... && $(GO) mod tidy -diff
	$(GO) generate ./... && git diff --exit-code -- '*.pb.go' docs/vectors
	@out=$$(git status --porcelain -- docs/vectors); if [ -n "$$out" ]; then echo "docs/vectors: files go generate made that are not committed:"; echo "$$out"; exit 1; fi

bench: ## benchmarks with memory stats (BENCHTIME, COUNT)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS)

fuzz: ## fuzz every target for FUZZTIME each (default 30s), each new input minimized for at most FUZZMINIMIZETIME (2s); every target runs, the failures are listed at the end (.ci/fuzz)
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) .ci/fuzz $(PKGS)

generate: ## regenerate *.pb.go and the conformance vectors (docs/vectors) and other generated code
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

loadtest: ## headline load test: zoned + botswarm here, zoned's /metrics scraped into the report (LOADTEST_BOTS, LOADTEST_DURATION, LOADTEST_SLO)
	@mkdir -p $(LOADTEST_DIR)
	$(GO) build -o $(LOADTEST_DIR)/zoned ./cmd/zoned
	$(GO) build -o $(LOADTEST_DIR)/botswarm ./cmd/botswarm
	@set -e; \
	  $(LOADTEST_DIR)/zoned --data $(LOADTEST_DIR)/data --udp $(LOADTEST_UDP) --http 127.0.0.1:0 --nats-listen 127.0.0.1:0 \
	    > $(LOADTEST_DIR)/zoned.log 2>&1 & zpid=$$!; \
	  trap 'kill -TERM $$zpid 2>/dev/null; wait $$zpid 2>/dev/null || true' EXIT; \
	  for i in $$(seq 100); do grep -q 'zoned ready' $(LOADTEST_DIR)/zoned.log && break; sleep 0.1; done; \
	  http=$$(sed -n 's/.*zoned ready.* http=\([^ ]*\).*/\1/p' $(LOADTEST_DIR)/zoned.log | head -n 1); \
	  $(LOADTEST_DIR)/botswarm --server $(LOADTEST_UDP) --key-file $(LOADTEST_DIR)/data/token.key \
	    $${http:+--metrics-url http://$$http/metrics} \
	    --bots $(LOADTEST_BOTS) --ramp 100 --duration $(LOADTEST_DURATION) --scenario $(LOADTEST_SCENARIO) \
	    --report $(LOADTEST_DIR)/report.json --html $(LOADTEST_DIR)/report.html \
	    --slo '$(LOADTEST_SLO)' $(LOADTEST_FLAGS)

# A local three-node cluster (docs/cluster.md): node 1 embeds NATS, nodes 2 and 3 join it with
# node 1's token key, the zones split as CLUSTER_ZONES (one list per node), and one botswarm
# spreads its bots round-robin over the three gateways. Every run starts from empty data dirs (a
# fresh NATS store: no leases left over from an earlier run). Reports, node logs and each node's
# /metrics (before and after the bots) land in $(CLUSTER_DIR); the exit status is botswarm's.
# Ports differ from `make loadtest`, so both can run on one machine.
#
# One source of truth with Kubernetes: every node gets ZONED_CONFIG, the file the manifests mount
# as the ConfigMap zoned-config (tick, NPCs, lease TTL, shutdown timeout), and the dev overlay's
# flags (--dev-game=true: botswarm needs the lane-0 echo). What differs is what must differ on one
# machine: node ids, ports, data dirs, node 1 embedding NATS, and a planned --zones split instead
# of auto (nodes started one after another in auto mode leave node 1 the whole world).
# deploy/zoned_test.go checks this recipe passes that file.
ZONED_CONFIG ?= deploy/k8s/base/zoned.json
CLUSTER_ZONED_FLAGS ?= --config $(ZONED_CONFIG) --dev-game=true
CLUSTER_BOTS ?= 600
CLUSTER_DURATION ?= 60s
CLUSTER_SCENARIO ?= wander
CLUSTER_FLAGS ?=
CLUSTER_SLO ?= rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m
CLUSTER_DIR ?= cluster-out
CLUSTER_HOST ?= 127.0.0.1
CLUSTER_UDP_PORTS ?= 7811 7812 7813
CLUSTER_HTTP_PORTS ?= 7821 7822 7823
CLUSTER_NATS_PORT ?= 14811
CLUSTER_ZONES ?= x0z0 x1z0 x0z1,x1z1
CLUSTER_LEASE_TTL ?=
CLUSTER_READY_SECONDS ?= 60

cluster: ## local 3-node cluster over NATS + botswarm across its gateways (CLUSTER_BOTS, CLUSTER_DURATION, CLUSTER_SLO)
	@mkdir -p $(CLUSTER_DIR)
	$(GO) build -o $(CLUSTER_DIR)/zoned ./cmd/zoned
	$(GO) build -o $(CLUSTER_DIR)/botswarm ./cmd/botswarm
	@set -uo pipefail; d='$(CLUSTER_DIR)'; h='$(CLUSTER_HOST)'; \
	  udp=($(CLUSTER_UDP_PORTS)); http=($(CLUSTER_HTTP_PORTS)); zones=($(CLUSTER_ZONES)); \
	  if [ $${#udp[@]} -ne 3 ] || [ $${#http[@]} -ne 3 ] || [ $${#zones[@]} -ne 3 ]; then \
	    echo "make cluster: CLUSTER_UDP_PORTS, CLUSTER_HTTP_PORTS and CLUSTER_ZONES need three entries each"; exit 2; fi; \
	  if ! "$$d/botswarm" --help 2>&1 | grep 'comma-separated list' >/dev/null; then \
	    echo "make cluster: this botswarm takes one --server only; the cluster run needs --server with a list of gateways"; exit 2; fi; \
	  pids=(); \
	  stop() { for i in 2 1; do [ -n "$${pids[$$i]:-}" ] && kill -TERM "$${pids[$$i]}" 2>/dev/null; done; \
	    for i in 2 1; do [ -n "$${pids[$$i]:-}" ] && wait "$${pids[$$i]}" 2>/dev/null; done; \
	    [ -n "$${pids[0]:-}" ] && { kill -TERM "$${pids[0]}" 2>/dev/null; wait "$${pids[0]}" 2>/dev/null; }; true; }; \
	  trap stop EXIT; trap 'exit 130' INT TERM; \
	  rm -rf "$$d"/data-n1 "$$d"/data-n2 "$$d"/data-n3 "$$d"/n?.log "$$d"/metrics-*.txt; \
	  servers=""; \
	  for i in 0 1 2; do n=n$$((i+1)); \
	    join=(--nats-listen "$$h:$(CLUSTER_NATS_PORT)"); \
	    if [ $$i -gt 0 ]; then join=(--nats "nats://$$h:$(CLUSTER_NATS_PORT)" --nats-creds "$$d/data-n1/node.creds" --key-file "$$d/data-n1/token.key"); fi; \
	    "$$d/zoned" $(CLUSTER_ZONED_FLAGS) --node-id $$n --zones "$${zones[$$i]}" --data "$$d/data-$$n" --udp "$$h:$${udp[$$i]}" \
	      --http "$$h:$${http[$$i]}" $(if $(CLUSTER_LEASE_TTL),--lease-ttl $(CLUSTER_LEASE_TTL)) "$${join[@]}" > "$$d/$$n.log" 2>&1 & pids[$$i]=$$!; \
	    ok=0; for t in $$(seq $$(( $(CLUSTER_READY_SECONDS) * 10 ))); do \
	      if grep -qs 'zoned ready' "$$d/$$n.log"; then ok=1; break; fi; \
	      kill -0 "$${pids[$$i]}" 2>/dev/null || break; sleep 0.1; done; \
	    if [ $$ok -ne 1 ]; then echo "make cluster: node $$n not ready within $(CLUSTER_READY_SECONDS)s; $$d/$$n.log:"; tail -n 20 "$$d/$$n.log"; exit 1; fi; \
	    grep -o 'msg="zoned ready".*owned=[^ ]*' "$$d/$$n.log" | sed "s/^/$$n: /"; \
	    servers="$${servers:+$$servers,}$$h:$${udp[$$i]}"; \
	  done; \
	  scrape() { for i in 0 1 2; do curl -fsS "http://$$h:$${http[$$i]}/metrics" > "$$d/metrics-n$$((i+1))-$$1.txt" || echo "make cluster: /metrics of n$$((i+1)) not read"; done; }; \
	  scrape before; t0=$$(date +%s.%N); rc=0; \
	  "$$d/botswarm" --server "$$servers" --key-file "$$d/data-n1/token.key" \
	    --bots $(CLUSTER_BOTS) --ramp 100 --duration $(CLUSTER_DURATION) --scenario $(CLUSTER_SCENARIO) \
	    --report "$$d/report.json" --html "$$d/report.html" \
	    --slo '$(CLUSTER_SLO)' $(CLUSTER_FLAGS) || rc=$$?; \
	  t1=$$(date +%s.%N); scrape after; \
	  left=unknown; waited=0; for t in $$(seq 40); do \
	    left=$$(for i in 0 1 2; do curl -fsS "http://$$h:$${http[$$i]}/metrics" 2>/dev/null; done | \
	      awk '/^ghostwire_zone_players[{]/ { s += $$2 } END { print s + 0 }'); \
	    [ "$$left" = 0 ] && break; sleep 0.25; waited=$$t; done; \
	  for i in 0 1 2; do if ! kill -0 "$${pids[$$i]}" 2>/dev/null; then wait "$${pids[$$i]}"; \
	    echo "make cluster: node n$$((i+1)) exited during the run, status $$? (137: SIGKILL); see $$d/n$$((i+1)).log"; pids[$$i]=; fi; done; \
	  { sed 's/^/B /' "$$d"/metrics-n?-before.txt; cat "$$d"/metrics-n?-after.txt; } | \
	  awk -v t0=$$t0 -v t1=$$t1 -v bots=$(CLUSTER_BOTS) ' \
	    /^#/ || /^B #/ { next } \
	    $$1 == "B" { v[$$2] -= $$3; next } \
	    { v[$$1] += $$2 } \
	    function sum(re,   k, s) { s = 0; for (k in v) if (k ~ re) s += v[k]; return s } \
	    END { secs = t1 - t0; \
	      mz = sum("^ghostwire_cluster_nats_messages_total[{]dir=\"out\",kind=\"zone\""); \
	      mc = sum("^ghostwire_cluster_nats_messages_total[{]dir=\"out\",kind=\"conn\""); \
	      bz = sum("^ghostwire_cluster_nats_bytes_total[{]dir=\"out\",kind=\"zone\""); \
	      bc = sum("^ghostwire_cluster_nats_bytes_total[{]dir=\"out\",kind=\"conn\""); \
	      ri = sum("^ghostwire_cluster_remote_inputs_total$$"); ins = sum("^ghostwire_zone_inputs_total$$"); \
	      share = ins > 0 ? ri / ins : 0; remote = bots * share; \
	      printf "cluster: %.1f s of bots on 3 nodes (deltas of the nodes'"'"' /metrics before and after botswarm)\n", secs; \
	      printf "  NATS out: %.0f msgs/s (zone %.0f, conn %.0f), %.1f kB/s (zone %.1f, conn %.1f)\n", \
	        (mz+mc)/secs, mz/secs, mc/secs, (bz+bc)/secs/1000, bz/secs/1000, bc/secs/1000; \
	      printf "  remote players: %.0f of %d (%.1f%% of zone inputs came from another node)\n", remote, bots, 100*share; \
	      if (remote > 0) printf "  per remote player: %.2f msgs/s, %.0f B/s\n", (mz+mc)/secs/remote, (bz+bc)/secs/remote; \
	      printf "  handoffs: %d cross-process (ghostwire_cluster_handoffs_total), %d in all (ghostwire_zone_handoffs_in_total)\n", \
	        sum("^ghostwire_cluster_handoffs_total$$"), sum("^ghostwire_zone_handoffs_in_total$$"); \
	      if (ri > 0) printf "  remote input latency: %.2f ms average over %d inputs\n", 1000*sum("^ghostwire_cluster_remote_input_latency_seconds_total$$")/ri, ri; \
	      printf "  dropped: stale epoch %d, misrouted %d, malformed %d, no owner %d, unknown player %d; send errors %d\n", \
	        sum("^ghostwire_cluster_stale_epoch_dropped_total$$"), sum("^ghostwire_cluster_misrouted_dropped_total$$"), \
	        sum("^ghostwire_cluster_malformed_dropped_total$$"), sum("^ghostwire_cluster_no_owner_dropped_total$$"), \
	        sum("^ghostwire_cluster_unknown_player_dropped_total$$"), sum("^ghostwire_cluster_errors_total$$") }' \
	    | tee "$$d/cluster-summary.txt"; \
	  echo "  players left in the world after the bots quit: $$left ($$(awk -v w=$$waited 'BEGIN { printf "%.2f", w / 4 }') s after the scrape; the zones report about once a second; 0 expected)" \
	    | tee -a "$$d/cluster-summary.txt"; \
	  if [ "$$left" != 0 ]; then echo "make cluster: $$left players still in the world 10 s after every bot quit: a Leave lost (docs/cluster.md)"; [ $$rc -eq 0 ] && rc=1; fi; \
	  exit $$rc

# The chaos proof (docs/benchmarks.md#resilience, cmd/chaos --help): three real zoned processes and
# botswarm on loopback; every CHAOS_EVERY a random node other than the NATS host (n1) is SIGTERMed,
# SIGKILLed or SIGSTOPped (SIGCONT after twice the lease TTL + 1 s) and brought back. A recorder
# keeps every write to the zones and players KV buckets; the audit afterwards checks one owner per
# zone and epoch, no write past the fence, every zone owned again within 5 s, the player records,
# and botswarm's invariants. Its short version (a drain, a SIGKILL, a SIGSTOP, 1 s leases, ~40 s) is
# TestChaosShort in cmd/chaos, run by `make race`. The exit status is the driver's (1: a failure,
# named on stdout). chaos-nats runs every node against a standalone nats-server and restarts it.
CHAOS_DIR ?= chaos-out
CHAOS_EVENTS ?= 9
CHAOS_EVERY ?= 20s
CHAOS_FLAGS ?=
CHAOS_NATS_FLAGS ?= --lease-ttl 3s --nats-outage 1s --bots 60
CHAOS_NATS_CLUSTER_FLAGS ?= --nats-outage 5s --bots 90

chaos: ## 3 zoned + botswarm for a few minutes, a node SIGTERMed/SIGKILLed/SIGSTOPped every 20 s, then an audit (CHAOS_EVENTS, CHAOS_EVERY, CHAOS_FLAGS)
	@mkdir -p $(CHAOS_DIR)
	$(GO) build -o $(CHAOS_DIR)/chaos ./cmd/chaos
	$(CHAOS_DIR)/chaos --out $(CHAOS_DIR) --events $(CHAOS_EVENTS) --every $(CHAOS_EVERY) $(CHAOS_FLAGS)

chaos-nats: ## 3 zoned on a standalone nats-server, which is restarted twice mid-run: leases renewed, local play goes on (CHAOS_NATS_FLAGS)
	@mkdir -p $(CHAOS_DIR)-nats
	$(GO) build -o $(CHAOS_DIR)-nats/chaos ./cmd/chaos
	$(CHAOS_DIR)-nats/chaos --out $(CHAOS_DIR)-nats --external-nats --plan nats-restart --events 2 --every 20s --warmup 10s --tail 15s $(CHAOS_NATS_FLAGS)

# chaos-nats-cluster: every node on three clustered nats-servers (zoned --kv-replicas 3); each event
# SIGKILLs the server leading the zones bucket (the other two elect a leader 4–9 s later) and starts it
# again after 5 s. Its short version is TestChaosNATSClusterKill in cmd/chaos.
chaos-nats-cluster: ## 3 zoned on a 3-server NATS cluster whose zones-bucket leader is SIGKILLed three times: leases held through the election (CHAOS_NATS_CLUSTER_FLAGS)
	@mkdir -p $(CHAOS_DIR)-nats-cluster
	$(GO) build -o $(CHAOS_DIR)-nats-cluster/chaos ./cmd/chaos
	$(CHAOS_DIR)-nats-cluster/chaos --out $(CHAOS_DIR)-nats-cluster --nats-cluster --plan nats-kill --events 3 --every 30s --warmup 10s --tail 20s $(CHAOS_NATS_CLUSTER_FLAGS)

# chaos-pause: every event a SIGSTOP of 10 s, past the clients' ack window (256 packets: 8.5 s at
# 30 Hz), with 15 s tokens so that the paused node's clients wait it out rather than reconnect:
# notify's far-packet acceptance (docs/protocol.md § 3.11), the zones' own lease check and the
# lease's hold (docs/cluster.md) under load.
CHAOS_PAUSE_FLAGS ?=

chaos-pause: ## chaos with every event a 10 s SIGSTOP (past the ack window) and 15 s tokens (CHAOS_PAUSE_FLAGS)
	@mkdir -p $(CHAOS_DIR)-pause
	$(GO) build -o $(CHAOS_DIR)-pause/chaos ./cmd/chaos
	$(CHAOS_DIR)-pause/chaos --out $(CHAOS_DIR)-pause --actions stop --stop-for 10s --token-timeout 15s --events 6 --every 20s $(CHAOS_PAUSE_FLAGS)

# The capacity curve: a whole node in one process (cmd/capacity) driven by botswarm in another,
# one fresh node per player count; server CPU per player-second, live heap per player (after
# GC), zone tick p99 and the bots' RTT p99, and the limit: the largest count whose tick p99 ≤ 25 ms
# and RTT p99 ≤ 50 ms with every bot connected and no move lost. Writes the table to stdout and to
# $(CAPACITY_DIR)/capacity.md, the plot to docs/capacity.png, the raw numbers to
# $(CAPACITY_DIR)/capacity.json. Takes about a minute per player count. The players spread over
# the default world's four zones as zoned places them; add --spawn x1z0 to CAPACITY_FLAGS for the
# one-zone crowd (every player starting in one zone, the capacity passes' measure before the 41st),
# or --external-nats for a cluster's topology (the node on a standalone nats-server, whose CPU and
# memory are then reported beside the node's instead of inside them).
CAPACITY_PLAYERS ?= 250,500,750,1000,1500,2000,2500,3000
CAPACITY_WINDOW ?= 20s
CAPACITY_FLAGS ?= --swarm-flags '--observers 10%'
CAPACITY_DIR ?= capacity-out

capacity: ## capacity curve: players vs tick p99, RTT p99, server CPU and heap (CAPACITY_PLAYERS, CAPACITY_WINDOW)
	@mkdir -p $(CAPACITY_DIR)
	$(GO) build -o $(CAPACITY_DIR)/botswarm ./cmd/botswarm
	$(GO) build -o $(CAPACITY_DIR)/capacity ./cmd/capacity
	$(CAPACITY_DIR)/capacity --botswarm $(CAPACITY_DIR)/botswarm --players $(CAPACITY_PLAYERS) \
	    --window $(CAPACITY_WINDOW) --json $(CAPACITY_DIR)/capacity.json --png docs/capacity.png \
	    --cpuprofile $(CAPACITY_DIR)/cpu.pprof --memprofile $(CAPACITY_DIR)/heap.pprof --breakdown $(CAPACITY_FLAGS) \
	    | tee $(CAPACITY_DIR)/capacity.md

# Side by side with the peers (docs/benchmarks.md, "Peers"): the same game workload through
# ghostwire, kcp-go and ENet on this machine, printed with the ratios peer ÷ ghostwire.
# bench/peers is a module of its own (the product's go.mod stays free of kcp-go), so this is
# not part of `make test`. ENet needs cgo and Debian's libenet-dev (apt-get install -y
# libenet-dev); without it the ENet rows say so. PEERS_FLAGS=-short: a smoke run (~1 min);
# the default (1,000 clients, then 100 impaired clients) takes about 3 minutes.
PEERS_FLAGS ?=
PEERS_BIN ?= $(or $(TMPDIR),/tmp)/ghostwire-peers

peers: ## side by side with kcp-go and ENet, ratios peer ÷ ghostwire (PEERS_FLAGS=-short: smoke run); not in make test
	@cd bench/peers && tags=; \
	  if pkg-config --exists libenet 2>/dev/null; then tags=enet; \
	  else echo "peers: libenet-dev not found (apt-get install -y libenet-dev): ENet is not built"; fi; \
	  $(GO) build -tags "$$tags" -o $(PEERS_BIN) . && $(PEERS_BIN) $(PEERS_FLAGS)
