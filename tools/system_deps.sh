#!/bin/sh
# Install system programs with apt where we can; never fail.
#
#   sh tools/system_deps.sh COMMAND:PACKAGE...     e.g.  dot:graphviz  chromium:chromium
#
# A COMMAND already on PATH is left alone. Otherwise, as root (or with password-less sudo) on a
# machine with apt-get, its Debian PACKAGE is installed (tools/apt_install.sh). Anywhere else a
# note says what is missing and what it is for, and we carry on: the FCL kernel works without
# these (the magics show DOT text instead of a drawing, the browser test is skipped outside CI).
. "$(dirname "$0")/apt_install.sh"

for pair in "$@"; do
  cmd=${pair%%:*}
  pkg=${pair#*:}
  if command -v "$cmd" >/dev/null 2>&1; then
    continue
  fi
  apt_install "$pkg"
  if ! command -v "$cmd" >/dev/null 2>&1; then
    echo "note: \`$cmd\` is not installed and could not be installed here (needs root and apt-get)."
    echo "      Install the package \`$pkg\` yourself if you want it; carrying on without it."
  fi
done
exit 0
