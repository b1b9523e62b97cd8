# symheap: `make demo` runs the example job, `make test` runs every check.
# Both install what they need on a fresh Debian machine.

GO          ?= go
BIN         := $(CURDIR)/.bin
STATICCHECK := $(BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
PEERS_BIN   := $(CURDIR)/bench/peers/bin
TEST_FLAGS  ?= -race -count=1 -timeout 30m
export GOFLAGS ?=

.PHONY: all build demo test check fmt vet staticcheck unit bench-smoke chaos chaos-short peers bench tools clean-shm

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

test: build tools peers fmt vet staticcheck unit bench-smoke
	@echo "make test: all checks passed"

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files are not formatted:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

unit:
	$(GO) test $(TEST_FLAGS) ./...

# Every benchmark once, so that none can rot.
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench . -benchtime=1x -timeout 20m ./...

clean-shm: build
	$(BIN)/symheap clean
