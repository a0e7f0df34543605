#!/bin/sh
# In the root of build-swift60 (arm64-sysroot.sh registered arm64's libc and
# installed dpkg-dev and the aarch64 binutils there): the Depends of the arm64
# binary BINARY, as dpkg-shlibdeps names its libraries' packages.
#   arm64-depends.sh BINARY   (a path in the repository)
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debian"
printf 'Source: birdctl\n\nPackage: birdctl\nArchitecture: any\n' > "$work/debian/control"
binary=$(realpath "$1")
# Its warnings (libc6's diversions of the usr-merge) are said, not fatal.
depends=$(cd "$work" && DEB_HOST_ARCH=arm64 dpkg-shlibdeps -O "$binary" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "arm64-depends: dpkg-shlibdeps found no libraries of $binary" >&2; exit 1; }
echo "$depends"
