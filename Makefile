# Everything a person runs. Each target creates or updates the local virtual
# environment (.venv) first, so a fresh checkout needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench proto clean venv

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed; installing Debian's python3-venv" >&2; \
	  { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; } && $(PYTHON) -m venv $(VENV); }

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Both processes for a person trying Tigress: the fetcher on the run folder's socket,
# the gateway on 127.0.0.1:8000 in the foreground; Ctrl-C stops both.
run: $(STAMP)
	@mkdir -p run
	@$(BIN)/python -m fetcher serve --listen unix:run/fetcher.sock & fetcher=$$!; \
	trap 'kill $$fetcher 2>/dev/null; wait $$fetcher 2>/dev/null' EXIT INT TERM; \
	TIGRESS_FETCHER=unix:run/fetcher.sock $(BIN)/python -m gateway

# Branch coverage of both packages is printed after the tests; fetcher/ must keep at least
# FETCHER_COVERAGE percent (the level reached by issue 15; raise it, never lower it).
FETCHER_COVERAGE := 95

test: $(STAMP)
	$(BIN)/python -m pytest --cov=fetcher --cov=gateway --cov-report=term:skip-covered $(PYTEST_ARGS)
	$(BIN)/python -m coverage report --include='fetcher/*' --fail-under=$(FETCHER_COVERAGE) \
	  --format=total >/dev/null || { echo "fetcher/ coverage is below $(FETCHER_COVERAGE)%" >&2; exit 1; }
	@echo "fetcher/ branch coverage: $$($(BIN)/python -m coverage report --include='fetcher/*' --format=total)% (gate $(FETCHER_COVERAGE)%)"

lint: $(STAMP)
	$(BIN)/ruff check fetcher gateway tests bench testkit
	$(BIN)/ruff format --check fetcher gateway tests bench testkit
	$(BIN)/mypy fetcher gateway tests bench testkit

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
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage
