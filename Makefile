# async-helm. `make run` and `make test` are all a newcomer needs (see README.md).
SHELL := /bin/bash
GO ?= go
CLUSTER_DIR := .cache/localcluster
CLUSTER_BIN := $(CLUSTER_DIR)/bin
LOCALCLUSTER := $(CLUSTER_BIN)/localcluster
K8S_VERSION := v1.37.2
K8S_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)
CLUSTER_TOOLS := kube-apiserver kube-controller-manager kube-scheduler server kwok
LOCAL_KUBECONFIG := $(CURDIR)/$(CLUSTER_DIR)/kubeconfig
# One set of build settings for every go command run from here: the tests, vet, the
# functions, the local cluster, Knative, ko's images. ko builds static binaries
# (CGO_ENABLED=0, -trimpath) and the Go build cache keys each compiled package by these
# settings, so a package is compiled once for all of them: the functions' image builds
# reuse what vet and the tests compiled, the product reuses ~970 client-go, api, grpc and
# Helm packages the local cluster compiled (CONTRIBUTING.md, "CI").
export CGO_ENABLED := 0
# `go env` so the GOFLAGS of the environment or of go's own env file (go env -w) are kept.
# -ldflags=-w: no DWARF in what the tests link (test binaries, the functions, oc-helm), about
# a quarter of each link; a command's own -ldflags (the cluster, Knative, the helm CLIs) wins.
export GOFLAGS := -trimpath -ldflags=-w $(filter-out -trimpath,$(shell $(GO) env GOFLAGS))
# What every go command run from here sees (config/knative's deploy test checks it).
.PHONY: go-env
go-env:
	@$(GO) env CGO_ENABLED GOFLAGS

# Tests use KUBECONFIG when it is set, else the local cluster.
TEST_KUBECONFIG := $(or $(KUBECONFIG),$(LOCAL_KUBECONFIG))
TEST_TIMEOUT ?= 40m
# Knative's state (ports, pids, logs) and binaries; internal/eventing reads KNATIVE_DIR.
export KNATIVE_DIR := $(CURDIR)/.cache/knative
KNATIVE_BIN := $(KNATIVE_DIR)/bin
KNATIVE := $(KNATIVE_BIN)/knative

.PHONY: all build test test-unit fmt-check vet cluster-tools cluster-up cluster-down knative-tools knative-up knative-down run demo bench chaos deploy clean

all: build

build:
	$(GO) build -o bin/ ./functions/submit ./functions/executor ./functions/notifier ./cmd/oc-helm

# The control plane is built from Go modules in its own module (tools/localcluster), so
# the product's go.mod never depends on k8s.io/kubernetes. Rebuilt only when that module changes.
$(CLUSTER_BIN)/.built: tools/localcluster/go.mod tools/localcluster/go.sum
	@mkdir -p $(CLUSTER_BIN)
	@echo "building the local cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok); a cold build takes ~10 min"
	cd tools/localcluster && time $(GO) build -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(CLUSTER_BIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler go.etcd.io/etcd/server/v3 sigs.k8s.io/kwok/cmd/kwok
	@touch $@

$(LOCALCLUSTER): $(wildcard tools/localcluster/*.go) tools/localcluster/go.mod
	cd tools/localcluster && $(GO) build -o $(CURDIR)/$(LOCALCLUSTER) .

cluster-tools: $(CLUSTER_BIN)/.built $(LOCALCLUSTER)

# Knative Eventing v0.50.0 (controllers, Broker ingress/filter, InMemoryChannel) as local
# processes, built in its own module (tools/knative). Rebuilt only when that module changes.
$(KNATIVE): $(wildcard tools/knative/*.go) tools/knative/go.mod tools/knative/go.sum
	@mkdir -p $(KNATIVE_BIN)
	cd tools/knative && $(GO) build -o $(KNATIVE) .

$(KNATIVE_BIN)/.built: tools/knative/go.mod tools/knative/go.sum tools/knative/prepare.go $(wildcard tools/knative/cmd/*/*.go) | $(KNATIVE)
	@echo "building Knative Eventing v0.50.0 (6 processes); a cold build takes ~3 min on 2 cores (the k8s.io stack comes from the product's build)"
	@start=$$(date +%s); \
	cd tools/knative && $(KNATIVE) prepare -dir $(KNATIVE_DIR) && \
	GOWORK=$(KNATIVE_DIR)/go.work $(GO) build -trimpath -ldflags "-s -w" -o $(KNATIVE_BIN)/ \
		./cmd/... knative.dev/eventing/cmd/broker/ingress knative.dev/eventing/cmd/broker/filter && \
	echo "built Knative Eventing in $$(( ($$(date +%s) - start) / 60 )) min $$(( ($$(date +%s) - start) % 60 )) s"
	@touch $@

knative-tools: $(KNATIVE_BIN)/.built $(KNATIVE)

# Starts Knative against the test cluster (the local one, or KUBECONFIG's); reused when up.
knative-up: knative-tools
	@$(KNATIVE) up -dir $(KNATIVE_DIR) -kubeconfig $(TEST_KUBECONFIG)

knative-down:
	@if [ -x $(KNATIVE) ]; then $(KNATIVE) down -dir $(KNATIVE_DIR); fi

cluster-up: cluster-tools knative-tools
	@$(LOCALCLUSTER) up -dir $(CLUSTER_DIR)
	@$(KNATIVE) up -dir $(KNATIVE_DIR) -kubeconfig $(LOCAL_KUBECONFIG)

# Knative first: namespaces holding Subscriptions go while its controllers still run.
cluster-down: knative-down
	@if [ -x $(LOCALCLUSTER) ]; then $(LOCALCLUSTER) down -dir $(CLUSTER_DIR); fi

# The modules of every Go module, fetched in parallel (.ci/run starts this in the
# background: downloads wait on the network, the builds on the CPU).
GO_MODULES := . tools/localcluster tools/knative tools/ko tools/helmv4 tools/vet
.PHONY: modules
modules:
	@pids=; for m in $(GO_MODULES); do (cd $$m && $(GO) mod download) & pids="$$pids $$!"; done; \
	status=0; for p in $$pids; do wait $$p || status=1; done; exit $$status

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# go vet's analyzers through tools/vet, which skips the facts-only analysis of the standard
# library and of dependencies: go vet type-checks each of the ~1,700 from source for facts
# our code hardly uses, about 110 CPU-seconds of a cold run (tools/vet/main.go).
VET_TOOL := .cache/bin/vet
$(VET_TOOL): tools/vet/main.go tools/vet/go.mod tools/vet/go.sum
	@mkdir -p $(@D)
	cd tools/vet && $(GO) build -o $(CURDIR)/$@ .
VET := $(GO) vet -vettool=$(CURDIR)/$(VET_TOOL)
vet: $(VET_TOOL)
	$(VET) ./...
	cd tools/localcluster && $(VET) ./...
	cd tools/knative && $(VET) .
	cd tools/vet && $(VET) .

# Every test, integration tests included, against a real API server. The two longest
# packages come first: go test starts test binaries in the order given, and a running
# test binary holds one of its -p (GOMAXPROCS) slots, compiles included, until it ends.
# -vet=off: `vet` above checked the same packages, their tests included, with every
# analyzer. go test's own vet keys its smaller analyzer set apart from go vet's, so it would
# type-check all ~1,700 dependencies a second time (3 CPU-minutes cold; docs/local.md, "Run 5").
LONG_TEST_PKGS := ./e2e ./functions/executor
test: fmt-check vet $(if $(KUBECONFIG),knative-up,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) test -count=1 -vet=off -timeout $(TEST_TIMEOUT) $(LONG_TEST_PKGS) ./...

# Unit tests: no cluster, no KUBECONFIG. The packages whose tests use the real API server
# (they import internal/testcluster, directly or through internal/teststack) are left to
# `make test`; ASYNC_HELM_NO_CLUSTER makes any other attempt to reach a cluster fail loudly.
UNIT_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./pkg/... ./internal/... \
	| grep -v -e 'internal/testcluster' -e 'internal/teststack' | cut -d' ' -f1)
test-unit:
	env -u KUBECONFIG ASYNC_HELM_NO_CLUSTER=1 $(GO) test -count=1 -timeout 5m $(UNIT_PKGS)

# Instances of each function behind its address, spread as Knative spreads a Service's pods
# (make run EXECUTORS=3 SUBMITS=2 NOTIFIERS=2; docs/local.md).
SUBMITS ?= 1
EXECUTORS ?= 1
NOTIFIERS ?= 1
run: build $(if $(KUBECONFIG),knative-up,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/devstack -submits=$(SUBMITS) -executors=$(EXECUTORS) -notifiers=$(NOTIFIERS) $(RUN_ARGS)

clean: cluster-down
	rm -rf bin

HELM_CLI := $(CLUSTER_BIN)/helm
$(HELM_CLI): tools/localcluster/go.mod
	cd tools/localcluster && $(GO) build -o $(CURDIR)/$(HELM_CLI) helm.sh/helm/v3/cmd/helm

# The helm v4 CLI of the v4 interop tests, from its own module (tools/helmv4 pins
# helm.sh/helm/v4), so the local cluster's module and build are untouched. Rebuilt only when
# that go.mod changes; testcluster.HelmV4CLI builds the same file when a test needs it first.
HELM4_VERSION := $(shell sed -n 's|^[[:space:]]*helm.sh/helm/v4 \(v[^ ]*\).*|\1|p' tools/helmv4/go.mod)
HELM4_CLI := .cache/bin/helm-$(HELM4_VERSION)
$(HELM4_CLI): tools/helmv4/go.mod tools/helmv4/go.sum
	@mkdir -p $(@D)
	cd tools/helmv4 && time $(GO) build -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM4_VERSION)" \
		-o $(CURDIR)/$@ helm.sh/helm/v4/cmd/helm
.PHONY: helm4
helm4: $(HELM4_CLI)

# One table (docs/benchmarks.md): each figure beside its floor or baseline measured in the
# same run (raw Secret creates, the helm CLI, Helm's SDK, a plain watch), the ratio, the
# target and ok/MISSED; also JSON under .cache/bench/. Exits non-zero only on an error.
# The defaults take about 20 minutes on a quiet 2-core machine. BENCH_ARGS=-quick: small
# sizes; BENCH_ARGS="-sections burst,scale" runs some sections (go run ./hack/bench -h).
# BENCH_PPROF_DIR=dir: the functions it starts write CPU profiles there.
bench: build $(HELM_CLI) $(if $(KUBECONFIG),knative-up,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/bench $(BENCH_ARGS)

# Faults: executor SIGKILLs during installs, concurrent upgrades, a sink outage, bursts, a
# burst through 2 submits, 3 executors and 2 notifiers with one of each killed (docs/chaos.md).
chaos: build $(if $(KUBECONFIG),knative-up,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/chaos -submits=$(SUBMITS) -executors=$(EXECUTORS) -notifiers=$(NOTIFIERS) $(CHAOS_ARGS)

# Deploy to the cluster of the current kubeconfig context (Knative Serving + Eventing
# installed; see docs/deploy.md). KO_DOCKER_REPO names the image registry.
# ko is the one tools/ko pins (v0.19.1), built once by ko-tools; KOCACHE skips linking a
# function again when nothing it is built from changed.
deploy: ko-tools
	@test -n "$(KO_DOCKER_REPO)" || { echo "set KO_DOCKER_REPO to the registry to push images to"; exit 1; }
	@mkdir -p .cache
	KOCACHE=$(CURDIR)/$(KO_DIR)/kocache $(KO_BIN)/ko resolve -f config/knative > .cache/async-helm.yaml
	kubectl apply -f config/knative/100-namespace.yaml
	@# The signing key is never shipped: 32 random bytes (hex) the first time, kept afterwards.
	@# It goes through stdin, not the command line, so no process listing shows it.
	@if kubectl -n async-helm get secret async-helm-events >/dev/null 2>&1; then \
		echo "secret async-helm/async-helm-events exists: keeping its key"; \
	else \
		head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | \
			kubectl -n async-helm create secret generic async-helm-events --from-file=EVENT_SIGNING_KEY=/dev/stdin; \
	fi
	kubectl apply -f .cache/async-helm.yaml

# ko and kolocal (a loopback registry, the base image, the image report) in their own module
# (tools/ko), so the product's go.mod never depends on ko. Rebuilt only when that module changes.
KO_DIR := .cache/ko
KO_BIN := $(KO_DIR)/bin
$(KO_BIN)/.built: tools/ko/go.mod tools/ko/go.sum $(wildcard tools/ko/cmd/kolocal/*.go)
	@mkdir -p $(KO_BIN)
	cd tools/ko && $(GO) build -o $(CURDIR)/$(KO_BIN)/ github.com/google/ko ./cmd/kolocal
	@touch $@

.PHONY: ko-tools deploy-local
ko-tools: $(KO_BIN)/.built

# The local cluster, deployed as a real one is: ko builds the three functions on a base image
# made here (CA certificates, user 65532) and pushes them to a registry on loopback (a fixed
# port: ko records the base image's name, port included, in each image); the manifests
# resolved to digests are applied server-side with the Knative CRDs. Prints digests and sizes.
DEPLOY_LOCAL_REGISTRY ?= 127.0.0.1:5870
deploy-local: ko-tools $(if $(KUBECONFIG),,cluster-up)
	$(KO_BIN)/kolocal -registry $(DEPLOY_LOCAL_REGISTRY) -ko $(KO_BIN)/ko -storage $(KO_DIR)/registry \
		-kocache $(KO_DIR)/kocache -f config/knative -out $(KO_DIR)/async-helm.yaml -report $(KO_DIR)/images.json
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/deploylocal -f $(KO_DIR)/async-helm.yaml

# The GitLab story with oc-helm (install --wait with live progress, list while pending,
# upgrade, history, uninstall) in make run's stack. GitLab's pods follow the local cluster's
# gitlab pod profile (pending-install for 2-3 minutes); DEMO_SPEED=fast for a quick run.
DEMO_SPEED ?= gitlab
demo: build $(if $(KUBECONFIG),knative-up,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/devstack -profile $(DEMO_SPEED) -script hack/demo.sh

# docs/demo.md: the transcript of a real make demo, each line with its elapsed time.
.PHONY: demo-doc
demo-doc: build $(if $(KUBECONFIG),knative-up,cluster-up)
	set -o pipefail; KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/devstack -profile $(DEMO_SPEED) -script hack/demo.sh 2>&1 | \
		$(GO) run ./hack/transcript -title "make demo (DEMO_SPEED=$(DEMO_SPEED))" -o docs/demo.md
