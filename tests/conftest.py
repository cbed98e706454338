"""Test-wide setup."""
import os

from fcl.opencl.oclgrind import OCLGRIND_ENV

# Oclgrind reads its options when its platform loads, which happens once per process: set them
# before any test touches OpenCL, so in-process runs on Oclgrind check for races and
# uninitialized values too. They change nothing on other devices.
for name, value in OCLGRIND_ENV.items():
    os.environ.setdefault(name, value)
