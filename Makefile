# mapc — every target installs or builds what it needs from the Go module proxy.
GO ?= go
BIN := bin/mapc
STATICCHECK_VERSION := 2025.1.1

.PHONY: all build test lint fuzz bench e2e clean examples

all: build

build:
	$(GO) build -o $(BIN) ./cmd/mapc

# The main job on the bundled examples.
examples: build
	$(BIN) compile -f examples/gatekeeper -o -

# Unit, golden and differential tests (Gatekeeper's engine vs the API server's MAP code).
test: build
	$(GO) vet ./...
	$(GO) test -count=1 ./...

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Go fuzz targets, each for FUZZTIME.
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./cel/ -run '^$$' -fuzz '^FuzzStr$$' -fuzztime $(FUZZTIME)
	$(GO) test ./compiler/source/ -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
