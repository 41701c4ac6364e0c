# mapc — every target installs or builds what it needs from the Go module proxy.
GO ?= go
BIN := bin/mapc
KYVERNO_ENGINE := bin/kyverno-engine
STATICCHECK_VERSION ?= v0.8.2

.PHONY: all build kyverno-engine test lint fuzz fuzz-short bench e2e clean examples

all: build kyverno-engine

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/mapc

# Kyverno's engine, the reference for Kyverno policies: a program of the module reference/kyverno
# (Kyverno's own dependency versions), which mapc finds next to itself.
kyverno-engine:
	$(GO) build -C reference/kyverno -o $(CURDIR)/$(KYVERNO_ENGINE) ./cmd/kyverno-engine

# The main job on the bundled examples.
examples: build
	$(BIN) compile examples/gatekeeper
	$(BIN) compile examples/kyverno

# Unit, golden and differential tests (Gatekeeper's and Kyverno's engines vs the API server's MAP
# code), the tests of Kyverno's engine module, then each Go fuzz target briefly (fuzz-short), so
# that what they check cannot regress unnoticed.
test: build kyverno-engine
	$(GO) vet ./...
	MAPC_KYVERNO_ENGINE=$(CURDIR)/$(KYVERNO_ENGINE) $(GO) test -count=1 -timeout 30m ./...
	cd reference/kyverno && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(call fuzz-each,$(FUZZ_SHORT))

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Every Go fuzz target, each for its budget: the words of $(1), in the order below.
define fuzz-each
	$(GO) test ./cel/ -run '^$$' -fuzz '^FuzzStr$$' -fuzztime $(word 1,$(1))
	$(GO) test ./compiler/source/ -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(word 2,$(1))
	$(GO) test ./verify/gen/ -run '^$$' -fuzz '^FuzzLocation$$' -fuzztime $(word 3,$(1))
	$(GO) test ./verify/gen/ -run '^$$' -fuzz '^FuzzMutatorYAML$$' -fuzztime $(word 4,$(1))
	$(GO) test ./compiler/kyverno/lower/ -run '^$$' -fuzz '^FuzzVariable$$' -fuzztime $(word 5,$(1))
	$(GO) test ./compiler/kyverno/lower/ -run '^$$' -fuzz '^FuzzVariableSemantics$$' -fuzztime $(word 6,$(1))
	$(GO) test ./compiler/kyverno/lower/ -run '^$$' -fuzz '^FuzzStrategicMerge$$' -fuzztime $(word 7,$(1))
	$(GO) test ./compiler/kyverno/ -run '^$$' -fuzz '^FuzzQuotedText$$' -fuzztime $(word 8,$(1))
endef

# Go fuzz targets, each for FUZZTIME; then fuzz-diff: MAPC_DIFF_N (default 100000) generated
# differential cases from seed MAPC_DIFF_SEED (verify/differential_test.go; about an hour on 2 cores).
FUZZTIME ?= 60s
fuzz:
	$(call fuzz-each,$(foreach t,1 2 3 4 5 6 7 8,$(FUZZTIME)))
	MAPC_DIFF_N=$${MAPC_DIFF_N:-100000} MAPC_DIFF_SEED=$${MAPC_DIFF_SEED:-1000001} $(GO) test ./verify/ -count=1 -timeout 0 -run '^TestDifferential$$' -v

# Each Go fuzz target briefly (make test runs this too): a count of inputs per target, about 5 s
# each on 2 cores. A count, not a duration: with a duration Go's fuzzing coordinator can fail a
# run that found nothing, with "context deadline exceeded", when a worker is still running an
# input as the time ends (a race in Go's fuzzing engine), which a loaded CI machine makes likely.
FUZZ_SHORT = 8000x 5000x 1000x 60x 6000x 6000x 8000x 20000x
fuzz-short:
	$(call fuzz-each,$(FUZZ_SHORT))

bench: kyverno-engine
	MAPC_KYVERNO_ENGINE=$(CURDIR)/$(KYVERNO_ENGINE) MAPC_BENCH=1 $(GO) test -count=1 -timeout 30m -run '^TestBenchReport$$' -v ./bench/

clean:
	rm -rf bin

# End-to-end tests against a real kube-apiserver and etcd on 127.0.0.1, both built from the Go
# module proxy and cached in $(HOME)/.cache/mapc-e2e (first run ~10 minutes), with Kyverno's
# engine for the Kyverno examples. E2E_TESTFLAGS passes flags to go test ("-run TestKyverno -v").
# See e2e/README.md.
KUBE_VERSION ?= 1.37.1
ETCD_VERSION ?= 3.7.0
e2e: kyverno-engine
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) GO=$(GO) \
		MAPC_KYVERNO_ENGINE=$(CURDIR)/$(KYVERNO_ENGINE) bash hack/e2e.sh run

# Gatekeeper v3.23.1 as a real mutating webhook vs mapc's policies on the same API server:
# latency per create and CPU per request (also builds Gatekeeper's manager, ~4 minutes once).
GATEKEEPER_VERSION ?= 3.23.1
.PHONY: e2e-bench
e2e-bench:
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) GATEKEEPER_VERSION=$(GATEKEEPER_VERSION) GO=$(GO) bash hack/e2e.sh bench
