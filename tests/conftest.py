"""Test-wide setup, and the fixtures of a kernel shared by a test module (tests/kernels.py)."""
import os
import sys

import pytest
from hypothesis import HealthCheck, settings
from jupyter_client.manager import start_new_kernel

from fcl.runtime.oclgrind import OCLGRIND_ENV
from kernels import restore_settings, settings_of

# Oclgrind reads its options when its platform loads, which happens once per process: set them
# before any test touches OpenCL, so in-process runs on Oclgrind check for races and
# uninitialized values too. They change nothing on other devices.
for name, value in OCLGRIND_ENV.items():
    os.environ.setdefault(name, value)

# No test asserts a wall-clock figure, and neither may Hypothesis behind a test's back: its
# per-example deadline (200 ms) and its too-slow health check fail on a loaded 2-core machine.
# Loaded before the test modules are imported, so every `settings(...)` there inherits it.
settings.register_profile("fcl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fcl")

# jsonschema (which nbformat, nbgrader and jupyter_kernel_test import) imports rfc3987_syntax if
# it is there, which builds 38 parsers for its `iri` formats: 1.5-2 s in every test process, a
# fifth of collecting the tests, for a format no test checks. Without it, jsonschema leaves those
# formats unchecked, as it always does unless a FormatChecker is asked for.
sys.modules.setdefault("rfc3987_syntax", None)


@pytest.fixture(scope="module")
def shared_kernel():
    km, kc = start_new_kernel(kernel_name="fcl")
    yield km, kc, settings_of(kc)
    kc.stop_channels()
    km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(shared_kernel):
    """The module's kernel, shared by its tests: the settings a test changes with `%config` are
    put back when it ends, passed or failed, so that none runs with another's."""
    km, kc, defaults = shared_kernel
    yield km, kc
    restore_settings(kc, defaults)


@pytest.fixture
def kc(kernel):
    """The client alone of `kernel`."""
    return kernel[1]
