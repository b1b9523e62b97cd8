# symheap: `make demo` runs the example job, `make test` runs every check.
# Both install what they need on a fresh Debian machine.

GO          ?= go
BIN         := $(CURDIR)/.bin
STATICCHECK := $(BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
PEERS_BIN   := $(CURDIR)/bench/peers/bin
TEST_FLAGS  ?= -count=1 -timeout 30m
export GOFLAGS ?=

.PHONY: all build demo test fmt vet staticcheck unit unit-race unit-norace bench-smoke chaos fuzz peers tools clean-shm mutate cluster cluster-deps demo-cluster bench-cluster

all: build

tools: $(STATICCHECK)

$(STATICCHECK):
	@command -v $(GO) >/dev/null || { echo "make: Go is not installed (need Go 1.26 or newer)"; exit 1; }
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

build:
	@command -v $(GO) >/dev/null || { echo "make: Go is not installed (need Go 1.26 or newer)"; exit 1; }
	$(GO) mod download
	$(GO) build -o $(BIN)/ ./cmd/...

# The main job: four PEs each write into their neighbour's partition through
# a plain slice, then print what they received.
demo: build
	$(BIN)/shrun -n 4 --heap 32m --timeout 60s ./examples/ring

# Peer harnesses (Open MPI OpenSHMEM and MPI, glibc/jemalloc/mimalloc):
# installs the Debian packages they need.
peers:
	bash bench/peers/build.sh $(PEERS_BIN)
	bash bench/peers/build-malloc.sh $(PEERS_BIN)

test: build tools peers fmt vet staticcheck unit bench-smoke cluster
	@echo "make test: all checks passed"

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files are not formatted:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# The tests run in both builds: with -race, and as users build it, where
# other code is compiled (the store-release assembly of shmsync, the
# messaging lock's parking and steal path, which -race turns off).
unit: unit-race unit-norace

unit-race:
	$(GO) test -race $(TEST_FLAGS) ./...

unit-norace:
	$(GO) test $(TEST_FLAGS) ./...

# Every benchmark once, so that none can rot.
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench . -benchtime=1x -timeout 20m ./...

# The fault campaign: hundreds of jobs of 2-8 PEs, one PE killed (-9) or
# stopped (-STOP) at a random moment in each. make test runs a short form.
# Every campaign prints its seed; CHAOS_FLAGS="-seed N" replays one.
CHAOS_RUNS ?= 300
CHAOS_FLAGS ?=
chaos:
	$(GO) run ./internal/chaos/cmd/chaos -runs $(CHAOS_RUNS) $(CHAOS_FLAGS)

# Long fuzzing (not in CI): FUZZTIME per target. Minimising each new input
# for the default 60 s would use up the time; the committed corpora
# (testdata/fuzz) run as seeds in every make test.
FUZZTIME ?= 2m
FUZZFLAGS ?= -fuzzminimizetime 2s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzOps$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./alloc/tlsf
	$(GO) test -run '^$$' -fuzz '^FuzzOps$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./alloc/buddy
	$(GO) test -run '^$$' -fuzz '^FuzzOps$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./alloc/dlmalloc
	$(GO) test -run '^$$' -fuzz '^FuzzParseSize$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./internal/config
	$(GO) test -run '^$$' -fuzz '^FuzzValidateHeader$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./internal/segment
	$(GO) test -run '^$$' -fuzz '^FuzzCacheModel$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./rcache

# Mutation tests (slow, not in CI): every mutant in internal/mutate/mutants.txt
# must make the tests it names fail. MUTATE_FLAGS: -only a,b -v -keep -timeout 10m
MUTATE_FLAGS ?=
mutate:
	$(GO) run ./internal/mutate/cmd/mutate $(MUTATE_FLAGS)

# The multi-node build (tag ucx): UCX and PMIx through cgo, jobs started by
# a PMIx launcher. cluster-deps installs what it needs on Debian (as root),
# or says what is missing; cluster vets that build and runs the root
# package's tests in it: the single-node suite, then TestCluster and
# TestClusterFaults, which run 4 PEs on two fake hosts of this machine
# under mpirun (internal/cluster: one IPC namespace and /dev/shm per host,
# UCX over TCP).
CLUSTER_PKGS := libucx-dev ucx-utils libpmix-dev openmpi-bin libopenmpi-dev
cluster-deps:
	@if pkg-config --exists ucx pmix && command -v mpirun >/dev/null && command -v unshare >/dev/null; then exit 0; fi; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "make: installing $(CLUSTER_PKGS) for the ucx build"; \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y $(CLUSTER_PKGS) >/dev/null 2>&1 || \
		  { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y $(CLUSTER_PKGS) >/dev/null 2>&1; }; } || \
		{ echo "make: could not install $(CLUSTER_PKGS); the ucx build and its tests need them"; exit 1; }; \
	else \
		echo "make: the ucx build needs $(CLUSTER_PKGS) (pkg-config ucx and pmix, mpirun, unshare): install them, or run make as root on Debian"; exit 1; \
	fi

cluster: cluster-deps
	$(GO) vet -tags ucx ./...
	SYMHEAP_REQUIRE_CLUSTER=1 $(GO) test -tags ucx -count=1 -timeout 10m .

# The multi-node example on two fake hosts of two PEs each.
demo-cluster: cluster-deps
	@mkdir -p $(BIN)
	$(GO) build -tags ucx -o $(BIN)/cluster-demo ./examples/cluster
	$(GO) run ./internal/cluster/cmd/fakehosts -hosts 2 -per-host 2 -x SHMEM_SYMMETRIC_SIZE=32m $(BIN)/cluster-demo

clean-shm: build
	$(BIN)/symheap clean
