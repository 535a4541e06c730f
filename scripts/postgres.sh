#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite: a cluster under .pgdata/, listening on
# 127.0.0.1 only, trust auth on loopback. Idempotent: installs the server only when it is
# missing, initialises the cluster once, starts it only when it is not running. Prints the
# database URL on its last line.
#
#   bash scripts/postgres.sh         start (if needed) and print the URL
#   bash scripts/postgres.sh stop    stop the server this checkout started
#   bash scripts/postgres.sh running exit 0 when this checkout's server is running
#
#   SESSIONGATE_PG_PORT  port for a server that is not running yet (default 54329, away
#                        from a system server's 5432)
set -euo pipefail
cd "$(dirname "$0")/.."

port="${SESSIONGATE_PG_PORT:-54329}"
role="sessiongate"
database="sessiongate_test"

find_bin() {
    local found
    found=$(command -v "$1" 2>/dev/null || true)
    if [ -z "$found" ]; then
        found=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1 || true)
    fi
    echo "$found"
}

# initdb and postgres refuse to run as root; run them as the postgres OS user.
as_postgres=()
if [ "$(id -u)" = 0 ]; then
    as_postgres=(runuser -u postgres --)
fi

data="$PWD/.pgdata"
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 \
    && ! runuser -u postgres -- test -x "$PWD"; then
    # The postgres user cannot reach this checkout (e.g. under /root): keep the cluster in
    # the temporary directory instead, one per checkout.
    data="${TMPDIR:-/tmp}/sessiongate-pgdata-$(echo "$PWD" | sha256sum | cut -c1-12)"
fi

# Everything below uses absolute paths; the postgres user may not be able to enter $PWD.
cd /

if [ "${1:-}" = running ]; then
    pg_ctl_bin="$(find_bin pg_ctl)"
    [ -n "$pg_ctl_bin" ] && [ -s "$data/postmaster.pid" ] \
        && "${as_postgres[@]}" "$pg_ctl_bin" -D "$data" status >/dev/null 2>&1
    exit
fi

if [ "${1:-}" = stop ]; then
    if [ -s "$data/postmaster.pid" ]; then
        "${as_postgres[@]}" "$(find_bin pg_ctl)" -D "$data" -m fast -w stop >&2 || true
    fi
    exit 0
fi

if [ -z "$(find_bin initdb)" ] || [ -z "$(find_bin pg_ctl)" ] || [ -z "$(find_bin psql)" ]; then
    echo "postgres.sh: installing PostgreSQL (Debian package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi
bindir="$(dirname "$(find_bin pg_ctl)")"
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
fi

if [ ! -s "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres "$data"
    chmod 700 "$data"
    "${as_postgres[@]}" "$bindir/initdb" -D "$data" -U postgres --auth=trust \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    # A test server: durability off for speed, sockets only in the data directory.
    cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$data'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
EOF
fi

if "${as_postgres[@]}" "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    # Already running: use the port it listens on (line 4 of postmaster.pid).
    port="$(sed -n 4p "$data/postmaster.pid")"
else
    "${as_postgres[@]}" "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
        -o "-p $port -k $data" start >/dev/null
fi

psql=("${as_postgres[@]}" "$(find_bin psql)" -h 127.0.0.1 -p "$port" -U postgres -d postgres
    -v ON_ERROR_STOP=1 -qtA)
if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" != 1 ]; then
    # CREATEDB: the tests give every test a fresh database of its own.
    "${psql[@]}" -c "CREATE ROLE $role LOGIN CREATEDB"
fi
if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$database'")" != 1 ]; then
    "${psql[@]}" -c "CREATE DATABASE $database OWNER $role"
fi
echo "postgresql://$role@127.0.0.1:$port/$database"
