"""Where the prelude's source lives: errors and generated code inside it are shown at the
user's call instead."""
from pathlib import Path

PRELUDE_PATH = Path(__file__).with_name("prelude.fcl")
PRELUDE_NAME = str(PRELUDE_PATH)  # the source name of the prelude's spans
