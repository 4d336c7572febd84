#!/bin/bash
# The Debian packages that hold the shared libraries BINARY links: what a runtime image must
# install. Fails, naming it, when a library belongs to no package.
#   deploy/runtime-packages.sh build/sloserve
set -euo pipefail
bin=${1:?usage: runtime-packages.sh BINARY}
libs=$(ldd "$bin" | awk '/=> \//{print $3}' | sort -u)
# usrmerge: a file is registered under /lib or /usr/lib, as its package shipped it; each library
# is looked up under these paths, in turn.
candidates() {
  local real
  real=$(readlink -f "$1")
  printf '%s\n' "$1" "$real" "${1#/usr}" "${real#/usr}" "/usr$1"
}
paths=()
for lib in $libs; do
  while IFS= read -r p; do paths+=("$p"); done < <(candidates "$lib")
done
# One dpkg query for every path (one per path takes minutes where many packages are installed):
# lines "pkg[:arch][, other]: /path".
declare -A owner
while IFS= read -r line; do
  case "$line" in diversion*) continue ;; esac
  pkg=${line%%: /*}
  path=${line#"$pkg": }
  pkg=${pkg%%,*}
  pkg=${pkg%%:*}
  [ -z "${owner[$path]:-}" ] && owner[$path]=$pkg
done < <(dpkg -S "${paths[@]}" 2>/dev/null || true)
missing=0
packages=()
for lib in $libs; do
  pkg=""
  while IFS= read -r p; do
    pkg=${owner[$p]:-}
    [ -n "$pkg" ] && break
  done < <(candidates "$lib")
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package holds $lib" >&2
    missing=1
  else
    packages+=("$pkg")
  fi
done
printf '%s\n' "${packages[@]}" | sort -u
exit $missing
