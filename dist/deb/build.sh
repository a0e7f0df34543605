#!/usr/bin/env bash
# Builds birdctl's .deb from a staged /usr tree: ROOT (from `make install
# PREFIX=/usr DESTDIR=ROOT`) → DEB. VERSION comes from the Makefile; a
# package for another architecture (make deb-arm64) is given DEB_ARCH,
# DEB_DEPENDS (its libraries' packages) and DEB_BUILT_USING, which this
# machine's dpkg cannot tell.
set -euo pipefail
root=$(cd "$1" && pwd)
deb=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
arch=${DEB_ARCH:-$(dpkg --print-architecture)}
if [[ $arch != "$(dpkg --print-architecture)" && ( -z ${DEB_DEPENDS:-} || -z ${DEB_BUILT_USING:-} ) ]]; then
    echo "deb: a package for $arch needs DEB_DEPENDS and DEB_BUILT_USING" >&2
    exit 1
fi

# Debian ships manual pages compressed.
gzip -9nf "$root/usr/share/man/man1/birdctl.1"

docs=$root/usr/share/doc/birdctl
install -d "$docs" "$root/DEBIAN"
install -m 644 "$here/copyright" "$docs/copyright"
# A native package's changelog: this version, when it was made (the last commit's date).
when=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'birdctl (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- birdctl developers <birdctl-maintainers@example.org>  %s\n' \
    "$VERSION" "$VERSION" "$when" | gzip -9n > "$docs/changelog.gz"
chmod 644 "$docs/changelog.gz"

# Depends: the shared libraries the binary links (libc, libm),
# as dpkg-shlibdeps names their packages, and bluez (bluetoothd) to talk to.
if [[ -n ${DEB_DEPENDS:-} ]]; then
    libs=$DEB_DEPENDS
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/debian"
    printf 'Source: birdctl\n\nPackage: birdctl\nArchitecture: any\n' > "$work/debian/control"
    binaries=("$root/usr/bin/birdctl")
    [[ -e $root/usr/libexec/birdctl/birdctl-proxy ]] && binaries+=("$root/usr/libexec/birdctl/birdctl-proxy")
    libs=$(cd "$work" && dpkg-shlibdeps -O "${binaries[@]}" | sed -n 's/^shlibs:Depends=//p')
fi
[[ -n $libs ]] || { echo "deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }
# Packed relative relocations (DT_RELR) need glibc 2.36; the binary says so with
# a version it needs, GLIBC_ABI_DT_RELR, but no symbol of it, which is all
# dpkg-shlibdeps counts.
if grep -q GLIBC_ABI_DT_RELR <<< "$(readelf -V "$root/usr/bin/birdctl")"; then
    libs=$(sed -E 's/libc6 \(>= 2\.(3[0-5]|[12][0-9])\)/libc6 (>= 2.36)/' <<< "$libs")
fi
# Built-Using: the source packages of the static archives linked in (STATIC_ARCHIVES,
# from the Makefile: libdbus, libstdc++), as Debian records code it ships a copy of.
built_using=${DEB_BUILT_USING:-$(for archive in ${STATIC_ARCHIVES:-}; do
    dpkg-query -W -f='${source:Package} (= ${source:Version})\n' "$(dpkg -S "$archive" | cut -d: -f1)"
done | sort -u | paste -sd, | sed 's/,/, /g')}
[[ -n $built_using ]] || { echo "deb: STATIC_ARCHIVES names no packaged archive" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$libs, bluez/" \
    -e "s/@BUILT_USING@/$built_using/" "$here/control.in" > "$root/DEBIAN/control"

mkdir -p "$(dirname "$deb")"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "deb: $deb"
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends Built-Using
# lintian: no errors (its warnings and notes are shown).
report=$(lintian --fail-on error "$deb" 2>&1) && status=0 || status=$?
grep -v "running with root privileges" <<< "$report" || true
[[ $status -eq 0 ]] || { echo "deb: lintian found errors" >&2; exit 1; }
echo "deb: lintian: no errors"
