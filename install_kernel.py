"""Register the FCL Jupyter kernel: `python install_kernel.py [--user|--sys-prefix|--prefix P]`.

A convenience for a source checkout; the work is done by fcl_kernel.install (see its docstring
for where the kernelspec goes by default).
"""
from fcl_kernel.install import main

if __name__ == "__main__":
    main()
