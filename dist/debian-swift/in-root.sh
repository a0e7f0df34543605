#!/usr/bin/env bash
# Runs a command in ROOT (a Debian root, fixtures/vm/build-root.sh) on this
# repository, bound at /src: in a mount namespace of its own, so /proc, /dev
# and the repository are bound for that command only and nothing stays
# mounted after it, however it ends.
#   in-root.sh ROOT COMMAND [ARGS...]
set -euo pipefail
root=$(realpath "$1"); shift
repo=$(realpath "$(dirname "$0")/../..")
[[ -x $root/usr/bin/env ]] || { echo "in-root: no root at $root" >&2; exit 1; }
mkdir -p "$root/src"
exec unshare --mount --propagation private -- /bin/bash -c '
    set -euo pipefail
    root=$1 repo=$2; shift 2
    mount --bind "$repo" "$root/src"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/tmp"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        /bin/sh -c "cd /src && exec \"\$@\"" sh "$@"
' in-root "$root" "$repo" "$@"
