"""`python -m fcl_kernel -f CONNECTION_FILE` starts the kernel."""
import os

from fcl.runtime.oclgrind import OCLGRIND_ENV

# Oclgrind reads its options when OpenCL loads its platforms: set them first, so that %%check
# finds data races and uninitialized values. They change nothing on other devices.
for name, value in OCLGRIND_ENV.items():
    os.environ.setdefault(name, value)

from fcl_kernel.kernel import FCLKernelApp  # noqa: E402

FCLKernelApp.launch_instance()
