# Sourced by the tools that install system packages: apt_install PACKAGE installs a Debian/Ubuntu
# package as root or with password-less sudo, refreshing the package lists if the install fails
# without them; it says so where it tries, and fails (status 1) quietly where it cannot.
apt_install() {
  if [ "$(id -u)" = 0 ]; then
    sudo=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    return 1
  fi
  command -v apt-get >/dev/null 2>&1 || return 1
  echo "installing $1 with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq "$1" >/dev/null 2>&1 && return 0
  $sudo apt-get update -qq >/dev/null 2>&1
  $sudo apt-get install -y -qq "$1" >/dev/null 2>&1
}
