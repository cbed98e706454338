#!/bin/sh
# A working OpenCL device, for `make setup`; never fails.
#
#   sh tools/opencl_device.sh FCL [--both]    (FCL: the venv's `fcl` command)
#
# --both (for `make bench`, which measures every PoCL side by side) installs the distribution's
# PoCL even where pip's works.
# pip's PoCL (inside the pyopencl wheel, LLVM 14) cannot build kernels on CPUs that LLVM 14 does
# not know (AMD Zen 5 and later): `fcl devices` then finds no usable device. The distribution's
# PoCL (Debian 12: PoCL 3.1 on LLVM 15) falls back to a CPU model it knows, so it is installed
# through apt where we can (tools/apt_install.sh). Elsewhere, or if that does not help either,
# a note says so: FCL then runs programs on its reference interpreter.
. "$(dirname "$0")/apt_install.sh"
fcl=$1

if [ "$2" = --both ]; then
  [ -e /etc/OpenCL/vendors/pocl.icd ] || apt_install pocl-opencl-icd \
    || echo "note: the distribution's PoCL (pocl-opencl-icd) could not be installed here"
  exit 0
fi
"$fcl" devices >/dev/null 2>&1 && exit 0
echo "no OpenCL device here can build kernels: the distribution's PoCL may"
apt_install pocl-opencl-icd
if "$fcl" devices >/dev/null 2>&1; then
  echo "the distribution's PoCL works here:"
  "$fcl" devices
  exit 0
fi
echo "note: still no usable OpenCL device (\`$fcl devices\` says why):"
"$fcl" devices | sed 's/^/      /'
echo "      FCL runs programs on its reference interpreter until one is installed."
exit 0
