"""`python -m fcl` is the `fcl` command."""
import sys

from fcl.cli import main

sys.exit(main())
