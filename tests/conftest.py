"""Test-wide setup."""
import os

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
