# humanwork-operator: one Makefile for building, running and testing.
#   make            create .venv and install the project with its test and lint extras
#   make up         the local control plane, operator, platform API and a demo org with its
#                   agent, in the foreground until Ctrl-C (UP_ARGS=--detach to leave it running);
#                   the agent runs as a container on the real node (root), or as a local
#                   process with UP_ARGS=--agent-mode=process
#   make demo       the demo agent plans the seed's example task: a plan waits in the queue
#   make test       everything the CI runs, on a fresh machine
#   make docs       regenerate the generated docs (OpenAPI, configuration tables, the chart's values)
#   make helm-binaries  helm (the chart's tests) from the Go module proxy, cached per machine
#   make otelcol-binaries  an OpenTelemetry Collector (the tracing tests), likewise
#   make promtool-binaries  promtool (the alert rules' tests) from the Go module proxy, cached
#   make images     build the container images with buildah on a Debian base (no Docker needed)
#   make node-up    a real node (kubelet, containerd, CNI, kube-proxy, CoreDNS, kube-router)
#                   beside the kwok node of a running `make cluster-up`; make node-down stops it
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CLUSTER := $(VENV)/bin/humanwork-cluster
# the slowest tests in every log (CI included), to see where the wall time goes
PYTEST_ARGS ?= --durations=40

.PHONY: all venv cluster-binaries cluster-up cluster-down cluster-status up demo down run-operator run-platform run-agent test test-unit test-faults lint format crds bench clean

all: venv

venv: $(STAMP)

# Every package at the version the locks name, so that a release on PyPI changes nothing
# here until the locks move: requirements.lock (every component's runtime dependencies; each
# image installs its own part, requirements-<component>.lock) and requirements-dev.lock
# (everything the venv holds, the test and lint tools included). The venv holds every
# component's group of pyproject.toml; `make lock` writes all the locks after a dependency
# changes (docs/operations.md, "Dependencies and locks").
$(STAMP): pyproject.toml requirements.lock requirements-dev.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements.lock -c requirements-dev.lock -e '.[operator,platform,agent,plugin,test,lint]'
	touch $(STAMP)

# the runtime locks from pyproject.toml's groups (humanwork_dev/locks.py), then the dev lock
.PHONY: lock lock-dev
lock: venv
	$(PY) -m humanwork_dev.locks
	$(MAKE) --no-print-directory lock-dev

lock-dev: venv
	$(PY) -m pip freeze --exclude-editable | grep -v '^humanwork-operator' > requirements-dev.lock

cluster-binaries: venv
	@ln -sf "$$(humanwork_dev/scripts/build.sh)/kubectl" $(VENV)/bin/kubectl

# helm, built from the Go module proxy at a pinned version into ~/.cache/humanwork (the chart's tests)
.PHONY: helm-binaries
helm-binaries: venv
	@ln -sf "$$(humanwork_dev/scripts/build-helm.sh)/helm" $(VENV)/bin/helm

# a small OpenTelemetry Collector (OTLP receiver, file exporter), built from the Go module
# proxy at pinned versions into ~/.cache/humanwork (the tracing tests)
.PHONY: otelcol-binaries
otelcol-binaries:
	@humanwork_dev/scripts/build-otelcol.sh >/dev/null

# promtool, built from the Go module proxy at a pinned version into ~/.cache/humanwork
# (`promtool check rules` and `promtool test rules` of manifests/monitoring)
.PHONY: promtool-binaries
promtool-binaries: venv
	@ln -sf "$$(humanwork_dev/scripts/build-promtool.sh)/promtool" $(VENV)/bin/promtool

.PHONY: postgres-binaries
postgres-binaries:
	@bash humanwork_dev/scripts/install-postgres.sh

.PHONY: browser-binaries
browser-binaries:
	@bash humanwork_dev/scripts/install-chromium.sh

cluster-up: venv cluster-binaries
	@$(CLUSTER) up

cluster-down: venv
	@$(CLUSTER) down

cluster-status: venv
	@$(CLUSTER) status

# the demo agent as a container on the real node (root): the node's binaries and the images
# first; UP_ARGS=--agent-mode=process runs everything as local processes instead
up: venv cluster-binaries $(if $(findstring process,$(UP_ARGS)),,helm-binaries node-binaries images)
	@$(VENV)/bin/humanwork-stack up $(UP_ARGS)

demo: venv
	@$(VENV)/bin/humanwork-stack demo

run-operator: venv
	@$(CLUSTER) token-kubeconfig humanwork-system humanwork-operator .cluster/operator/kubeconfig && \
	  KUBECONFIG=.cluster/operator/kubeconfig HUMANWORK_OPERATOR_METRICS_ADDRESS=127.0.0.1 \
	  $(VENV)/bin/humanwork-operator --liveness http://127.0.0.1:8080/healthz

run-platform: venv
	$(VENV)/bin/humanwork-platform serve

run-agent: venv
	@test -n "$(AGENT)" || { echo "usage: make run-agent AGENT=<namespace>/<name>"; exit 2; }
	$(VENV)/bin/humanwork-run-agent $(AGENT) --platform-url http://127.0.0.1:8000

# the CRDs from the models: for kustomize (crds/) and for the Helm chart (its files/crds/)
crds: venv
	$(PY) -m humanwork_core.crdgen --out crds/
	$(PY) -m humanwork_core.crdgen --out charts/humanwork-operator/files/crds/

down: venv
	@$(VENV)/bin/humanwork-stack down

# what `make test` needs, on a fresh machine in about the time of the slowest build: the
# system packages first, one at a time (apt holds one lock), then the builds side by side
# (helm; the control plane, then the node's binaries that reuse its go.mod; the images),
# so that one build's downloads overlap another's compiling. On a warm machine each step
# finds its cache and returns at once. BUILD_JOBS=1 builds one after another.
BUILD_JOBS ?= 3
.PHONY: test-prerequisites system-packages
test-prerequisites: venv
	@$(MAKE) --no-print-directory -j1 system-packages
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) --output-sync=line helm-binaries otelcol-binaries promtool-binaries images node-binaries

system-packages: postgres-binaries browser-binaries
	@bash humanwork_dev/scripts/node-packages.sh

# everything, the real node's tests (tests/node: root, containerd, iptables) included
test: test-prerequisites
	$(PY) -m pytest --ignore=tests/faults $(PYTEST_ARGS)
	$(PY) -m pytest tests/faults $(PYTEST_ARGS)

# the fault suite alone (also the last part of `make test`): parts killed or cut mid-approval
test-faults: venv cluster-binaries postgres-binaries
	$(PY) -m pytest tests/faults $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy -p humanwork_core -p agent_operator -p platform_api -p agent_image -p humanwork_dev -p kubectl_humanwork
	$(VENV)/bin/lint-imports
	$(PY) -m humanwork_dev.deployables --check
	$(PY) -m humanwork_dev.helmdocs --check
	$(PY) -m humanwork_dev.chartpolicies --check
	$(PY) -m humanwork_dev.sizes

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv cluster-binaries
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

.PHONY: docs images
docs: venv
	$(PY) -m humanwork_dev.deployables
	$(PY) -m humanwork_dev.helmdocs
	$(PY) -m humanwork_dev.chartpolicies

# buildah (Debian's package) on a base made by debootstrap; cached in ~/.cache/humanwork/images.
# With Docker: docker build -f Dockerfile.<name> -t humanwork/<name>:0.1.0 . works unchanged.
images:
	@bash humanwork_dev/scripts/images.sh --archive $${HUMANWORK_CACHE:-$$HOME/.cache/humanwork}/images/archives

.PHONY: node-binaries node-up node-down node-status
# after the control plane's binaries: build-node.sh reuses the go.mod that build.sh writes
node-binaries: cluster-binaries
	@bash humanwork_dev/scripts/node-packages.sh && bash humanwork_dev/scripts/build-node.sh

node-up: venv cluster-up node-binaries images
	@$(VENV)/bin/humanwork-node up

node-down: venv
	@$(VENV)/bin/humanwork-node down

node-status: venv
	@$(VENV)/bin/humanwork-node status

# only the real-node tests (also part of `make test`), see tests/node/conftest.py
.PHONY: test-node
test-node: venv cluster-binaries helm-binaries node-binaries images
	$(PY) -m pytest tests/node $(PYTEST_ARGS)
