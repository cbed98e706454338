"""Test-wide setup."""
import os
import sys

from hypothesis import HealthCheck, settings

from fcl.opencl.oclgrind import OCLGRIND_ENV

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
