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
# Tests use KUBECONFIG when it is set, else the local cluster.
TEST_KUBECONFIG := $(or $(KUBECONFIG),$(LOCAL_KUBECONFIG))
TEST_TIMEOUT ?= 40m

.PHONY: all build test fmt-check vet cluster-tools cluster-up cluster-down run demo bench chaos deploy clean

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

cluster-up: cluster-tools
	@$(LOCALCLUSTER) up -dir $(CLUSTER_DIR)

cluster-down:
	@if [ -x $(LOCALCLUSTER) ]; then $(LOCALCLUSTER) down -dir $(CLUSTER_DIR); fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd tools/localcluster && $(GO) vet ./...

# Every test, integration tests included, against a real API server.
test: fmt-check vet $(if $(KUBECONFIG),,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

run: build $(if $(KUBECONFIG),,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/devstack $(RUN_ARGS)

clean: cluster-down
	rm -rf bin

HELM_CLI := $(CLUSTER_BIN)/helm
$(HELM_CLI): tools/localcluster/go.mod
	cd tools/localcluster && $(GO) build -o $(CURDIR)/$(HELM_CLI) helm.sh/helm/v3/cmd/helm

# Figures beside their targets (README "Benchmarks"); BENCH_ARGS=-skip-notifier for a quick run.
bench: build $(HELM_CLI) $(if $(KUBECONFIG),,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/bench $(BENCH_ARGS)

# Faults: executor SIGKILLs during installs, concurrent upgrades, a sink outage (README "Chaos").
chaos: build $(if $(KUBECONFIG),,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/chaos $(CHAOS_ARGS)

# Deploy to the cluster of the current kubeconfig context (Knative Serving + Eventing
# installed; see README "Deploying on Knative"). KO_DOCKER_REPO names the image registry.
KO_VERSION ?= v0.19.1
deploy:
	@test -n "$(KO_DOCKER_REPO)" || { echo "set KO_DOCKER_REPO to the registry to push images to"; exit 1; }
	$(GO) run github.com/google/ko@$(KO_VERSION) resolve -f config/knative > .cache/async-helm.yaml
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
		-f config/knative -out $(KO_DIR)/async-helm.yaml -report $(KO_DIR)/images.json
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/deploylocal -f $(KO_DIR)/async-helm.yaml

# The GitLab story with oc-helm (install, pending-install, deployed, upgrade, list), in make run's stack.
demo: build $(if $(KUBECONFIG),,cluster-up)
	KUBECONFIG=$(TEST_KUBECONFIG) $(GO) run ./hack/devstack -script hack/demo.sh
