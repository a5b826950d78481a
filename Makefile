# The README's two set-up commands: `make test` and `make serve`. Both are idempotent and work on a
# fresh machine with only Python 3.11 and gcc: they create .venv, install the pinned CPU torch first
# (a bare `torch` requirement would pull several GB of CUDA packages), then the project with what
# the command needs (pyproject.toml): `install` the serving dependencies alone (what the Docker
# image has; enough for serve.bench too), `install-train` adds the `train` extra, `install-dev` the
# `dev` extra (which holds `train`: the tests train bundles) for tests, lint and the load test.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0
# One stamp per install; a larger install also stamps the ones it holds (dev > train > serving).
STAMP_SERVE := $(VENV)/.relserve-installed-serve
STAMP_TRAIN := $(VENV)/.relserve-installed-train
STAMP_DEV := $(VENV)/.relserve-installed-dev
EXTRA_serve :=
EXTRA_train := [train]
EXTRA_dev := [dev]
HELD_serve :=
HELD_train := $(STAMP_SERVE)
HELD_dev := $(STAMP_SERVE) $(STAMP_TRAIN)

DATA ?= data/demo
ARTIFACTS ?= artifacts
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: install install-train install-dev prometheus redis test lint serve demo-data demo-artifacts real-artifacts \
	retrain loadtest clean

install: $(STAMP_SERVE)
install-train: $(STAMP_TRAIN)
install-dev: $(STAMP_DEV)

$(VENV)/.relserve-installed-%: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "relserve needs Python >= 3.11, found " + sys.version.split()[0]'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_PIN)
	$(BIN)/python -m pip install --quiet -e '.$(EXTRA_$*)'
	@$(BIN)/python -c 'import torch; assert torch.__version__.startswith("2.13.0"), torch.__version__'
	@touch $@ $(HELD_$*)

# The monitoring test drives a real Prometheus: Debian's `prometheus` package provides prometheus and
# promtool. Installed here when missing and we may (root, or passwordless sudo); otherwise one line
# says what to install, before the minutes of `install`. The package starts a system service on
# install; the tests run their own server, so it is stopped. RELSERVE_ALLOW_SKIP_PROMETHEUS=1 skips
# both the install and the monitoring test.
prometheus:
	@if [ -n "$$RELSERVE_ALLOW_SKIP_PROMETHEUS" ]; then exit 0; fi; \
	if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then exit 0; fi; \
	need="make test: needs prometheus and promtool: run 'sudo apt-get install prometheus' (Debian/Ubuntu) or put both binaries on PATH, or set RELSERVE_ALLOW_SKIP_PROMETHEUS=1 to skip the monitoring test"; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "$$need" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "$$need" >&2; exit 1; }; \
	echo "make test: installing Debian's prometheus package" >&2; \
	{ $$SUDO apt-get update -qq >/dev/null && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } \
	  || { echo "$$need" >&2; exit 1; }; \
	$$SUDO systemctl stop prometheus >/dev/null 2>&1 || $$SUDO service prometheus stop >/dev/null 2>&1 || true

# The ingestion tests run the Redis Streams log against a real redis-server (Debian's redis-server
# package), installed here when missing and we may (root, or passwordless sudo). Unlike prometheus, a
# machine where it cannot be installed still runs `make test`: those tests then skip, saying why. The
# package starts a system service on install; the tests run their own server, so it is stopped.
redis:
	@if command -v redis-server >/dev/null 2>&1; then exit 0; fi; \
	skip="make test: redis-server could not be installed; the Redis ingestion tests will be skipped"; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "$$skip (run 'sudo apt-get install redis-server' to run them)" >&2; exit 0; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "$$skip" >&2; exit 0; }; \
	echo "make test: installing Debian's redis-server package" >&2; \
	{ $$SUDO apt-get update -qq >/dev/null && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null; } \
	  || { echo "$$skip" >&2; exit 0; }; \
	$$SUDO systemctl stop redis-server >/dev/null 2>&1 || $$SUDO service redis-server stop >/dev/null 2>&1 || true

# pytest exits 5 when it collects nothing: an empty suite tests nothing, so it fails loudly.
test: prometheus redis install-dev
	@$(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$status

lint: install-dev
	$(BIN)/ruff check .

demo-data: install-train
	@test -f $(DATA)/transactions_train.csv || $(BIN)/python -m training.synth --out $(DATA)

demo-artifacts: demo-data
	@test -f $(ARTIFACTS)/churn/metrics.json -a -f $(ARTIFACTS)/sales/metrics.json -a -f $(ARTIFACTS)/purchase/metrics.json \
		|| $(BIN)/python -m training.fit --data $(DATA) --task all --out $(ARTIFACTS)

# Real transactions (data/real/online-retail-ii: the UCI Online Retail II file as published, read
# through its relserve.toml; CC BY 4.0).
REAL_DATA ?= data/real/online-retail-ii
REAL_ARTIFACTS ?= artifacts-real

real-artifacts: install-train
	$(BIN)/python -m training.fit --data $(REAL_DATA) --task all --out $(REAL_ARTIFACTS)

# The retrain loop (docs/model-repository.md): train every task on what a running server serves (its
# snapshot plus every row ingested into STATE_DIR) and write the next version of each into ARTIFACTS,
# which the server loads by itself. Run it from cron, e.g. weekly: `0 3 * * 1 make -C /srv/relserve retrain`.
STATE_DIR ?= state
RETRAIN_ARGS ?= --warm-serving-cache

retrain: install-train
	$(BIN)/python -m training.fit --data $(STATE_DIR) --out $(ARTIFACTS) --task all $(RETRAIN_ARGS)

# Serving itself needs only `install`; this target also makes the demo bundles when they are missing
# (demo-data, demo-artifacts: training), hence the `train` extra.
serve: demo-artifacts
	$(BIN)/python -m serve --artifacts $(ARTIFACTS) --host $(HOST) --port $(PORT)

# A 60 s headless Locust run against a server it starts itself; the report goes to out/loadtest.
# Locust and matplotlib come with the `dev` extra.
loadtest: demo-artifacts install-dev
	$(BIN)/python -m loadtest.run --artifacts $(ARTIFACTS) --users 16 --spawn-rate 16 --duration 60s --out out/loadtest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
