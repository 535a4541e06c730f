#!/usr/bin/env bash
# The script sandbox (agents with actions = "sandbox", tests/test_sandbox.py) runs scripts
# under bubblewrap: install it (Debian package) when `bwrap` is missing, then check that it
# can create the namespaces the sandbox uses. Exits 0 when bwrap works, non-zero (with
# bwrap's own message) when it does not.
#
#   bash scripts/sandbox.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
    echo "sandbox.sh: installing bubblewrap (Debian package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq bubblewrap >&2
fi

# As the gateway does (src/sessiongate/actions/bwrap.py): as root no user namespace, as
# anyone else an unprivileged one.
userns=()
if [ "$(id -u)" != 0 ]; then
    userns=(--unshare-user)
fi
system=(--ro-bind /usr /usr)
for entry in /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [ -L "$entry" ]; then
        system+=(--symlink "$(readlink "$entry")" "$entry")
    elif [ -d "$entry" ]; then
        system+=(--ro-bind "$entry" "$entry")
    fi
done
if ! bwrap "${userns[@]}" --unshare-ipc --unshare-pid --unshare-net --unshare-uts \
    --die-with-parent --new-session --clearenv "${system[@]}" --proc /proc --dev /dev \
    -- /usr/bin/true; then
    echo "sandbox.sh: $(command -v bwrap) is installed but cannot create a sandbox here" >&2
    exit 1
fi
echo "sandbox.sh: $(bwrap --version) works" >&2
