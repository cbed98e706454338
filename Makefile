# `make test` is what CI runs on a fresh clone: it sets everything up from scratch.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup test clean

setup: $(STAMP)

# An editable install leaves out the wheel's data files, the kernelspec among them, so the FCL
# kernel is registered in the venv explicitly: a Jupyter run from .venv then offers it.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) install_kernel.py --sys-prefix
	touch $(STAMP)

test: setup
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
