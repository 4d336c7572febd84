#!/bin/bash
# The Debian packages that hold the shared libraries BINARY links: what a runtime image must
# install. Fails, naming it, when a library belongs to no package.
#   deploy/runtime-packages.sh build/sloserve
set -euo pipefail
bin=${1:?usage: runtime-packages.sh BINARY}
missing=0
packages=()
for lib in $(ldd "$bin" | awk '/=> \//{print $3}'); do
  real=$(readlink -f "$lib")
  # usrmerge: a file is registered under /lib or /usr/lib, as its package shipped it.
  pkg=""
  for path in "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr$lib"; do
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
    [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package holds $lib" >&2
    missing=1
  else
    packages+=("$pkg")
  fi
done
printf '%s\n' "${packages[@]}" | sort -u
exit $missing
