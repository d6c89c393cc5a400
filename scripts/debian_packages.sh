#!/usr/bin/env bash
# Installs the Debian packages a side venv's wheels link against, when they are missing (as root, with apt-get);
# otherwise says which to install. Usage: scripts/debian_packages.sh PACKAGE...
set -euo pipefail
[ "$#" -gt 0 ] || exit 0
command -v dpkg >/dev/null 2>&1 || { echo "not a Debian host: make sure these libraries are installed: $*"; exit 0; }
missing=()
for package in "$@"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
