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
    # The Package.resolved a newer Swift wrote pins the proxy'"'"'s packages,
    # which Swift 6.0 leaves out and cannot fetch here: it resolves afresh,
    # in a file of its own for this command.
    if [[ -e $root/src/Package.resolved ]]; then
        printf "{\"pins\": [], \"version\": 2}\n" > "$root/tmp/Package.resolved"
        mount --bind "$root/tmp/Package.resolved" "$root/src/Package.resolved"
    fi
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        /bin/sh -c "cd /src && exec \"\$@\"" sh "$@"
' in-root "$root" "$repo" "$@"
