#!/usr/bin/env bash
# Makes the arm64 (aarch64) sysroot birdctl is cross-built against: the
# packages RECIPE pins, downloaded by apt in ROOT (the Debian 13 root of make
# build-swift60, which gets arm64 as a foreign architecture) and unpacked
# into SYSROOT, a folder of this repository (the root sees it under /src).
# RECIPE's `root PACKAGE=VERSION` lines are installed in ROOT (to package
# the result). SYSROOT.built-using names the source packages of the static
# archives linked in (libdbus, libstdc++ and libgcc, the Swift runtime).
#   arm64-sysroot.sh ROOT RECIPE SYSROOT
# Of swiftlang:arm64 (an aarch64 toolchain, never run here) only the static
# Swift resources are unpacked, and the clang resources they link to.
set -euo pipefail
root=$1 recipe=$2 sysroot=$3
here=$(dirname "$0")
repo=$(realpath "$here/../..")
sysroot=$(realpath -m "$sysroot")
[[ $sysroot == "$repo"/* ]] || { echo "arm64-sysroot: $sysroot is not in the repository" >&2; exit 1; }
packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e '/^root /d' "$recipe")
in_root=$(sed -n 's/^root //p' "$recipe")
debs=$sysroot.debs
rm -rf "$sysroot" "$debs" "$sysroot.recipe" "$sysroot.built-using"
mkdir -p "$debs"
# The root's apt downloads as root: its sandbox user cannot write into the repository.
"$here/in-root.sh" "$root" sh -c '
    set -e
    dpkg --add-architecture arm64
    apt-get update -q > /dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $2 > /dev/null
    cd "$1" && shift 2 && apt-get download -q -o APT::Sandbox::User=root "$@"
' sh "/src/${debs#"$repo"/}" "$in_root" $packages
mkdir -p "$sysroot"
for deb in "$debs"/*.deb; do
    case $(basename "$deb") in
        swiftlang_*) dpkg-deb --fsys-tarfile "$deb" \
            | tar -C "$sysroot" -x ./usr/libexec/swift/lib/swift_static ./usr/libexec/swift/lib/clang ;;
        *) dpkg -x "$deb" "$sysroot" ;;
    esac
done
# Debian's /lib is usr/lib (base-files, not unpacked here): libc.so names
# /lib/aarch64-linux-gnu/libc.so.6, and the program interpreter is
# /lib/ld-linux-aarch64.so.1 (where qemu-aarch64-static -L looks).
ln -sfn usr/lib "$sysroot/lib"
for deb in "$debs"/libdbus-1-dev_*.deb "$debs"/libstdc++-14-dev_*.deb "$debs"/swiftlang_*.deb; do
    source=$(dpkg-deb -f "$deb" Source) version=$(dpkg-deb -f "$deb" Version)
    # Source is left out when it is the package's own name, and carries its version when that differs.
    [[ $source == *"("*")" ]] && version=${source#*(} version=${version%)} source=${source%% *}
    echo "${source:-$(dpkg-deb -f "$deb" Package)} (= $version)"
done | sort -u | paste -sd, | sed 's/,/, /g' > "$sysroot.built-using"
rm -rf "$debs"
cp "$recipe" "$sysroot.recipe"
echo "arm64-sysroot: $(du -sh "$sysroot" | cut -f1) in $sysroot"
