# Shared helpers for engram's scripts. Source it; do not run it.
# Every step prints what it does; a failed step stops with what to do next.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ENGRAM_HOME="${ENGRAM_HOME:-$ROOT/.engram}"
# The local embedder's files (scripts/setup installs them; engram-mcp, the
# tests and the bench read these variables).
export ENGRAM_MODEL_DIR="${ENGRAM_MODEL_DIR:-$ENGRAM_HOME/models/all-MiniLM-L6-v2}"
export ENGRAM_ONNX_RUNTIME="${ENGRAM_ONNX_RUNTIME:-$ENGRAM_HOME/lib/libonnxruntime.so}"
export DEBIAN_FRONTEND=noninteractive
export PATH="$HOME/.cargo/bin:$PATH"
# cargo's build output lives outside the clone, so that a fresh clone (CI runs
# one right after a session) reuses what the last build compiled.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/engram/target}"

PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=/usr/bin/pg_config
PGRX_VERSION=0.18.1
PGVECTOR_MIN=0.8.0

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
  printf '\n\033[31mERROR:\033[0m %s\n' "$1" >&2
  [ $# -gt 1 ] && printf '       %s\n' "${@:2}" >&2
  exit 1
}

as_postgres() { runuser -u postgres -- "$@"; }

# require_free_space DIR GIB: stops before a build or a test run that would
# fail half-way on a full disk (a full disk surfaces as a bare "db error" in
# whichever test writes next).
require_free_space() {
  local dir="$1" need="$2" have
  mkdir -p "$dir"
  have="$(df --output=avail -B1G "$dir" | tail -1 | tr -d ' ')"
  [ "$have" -ge "$need" ] ||
    die "only ${have} GiB free under $dir; the build and the test clusters need about ${need} GiB" \
      "free space (e.g. rm -rf $CARGO_TARGET_DIR/debug/incremental, or cargo clean with CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
}

# prune_target: every build with other flags or from another clone leaves
# its own copy of each test binary (300-500 MB apiece) in the persistent
# target directory; keep the two newest of each and drop the rest, so that
# the directory CI shares with every session stops growing.
prune_target() {
  local deps="$CARGO_TARGET_DIR/debug/deps"
  [ -d "$deps" ] || return 0
  find "$deps" -maxdepth 1 -type f -perm -u+x -regextype posix-extended -regex '.*-[0-9a-f]{16}' -printf '%T@ %p\n' |
    sed 's/^\([^ ]*\) \(.*\)-\([0-9a-f]\{16\}\)$/\2 \1 \2-\3/' | sort -k1,1 -k2,2nr |
    awk '{ if ($1 == name) { n++ } else { name = $1; n = 1 } if (n > 2) print $3 }' |
    xargs -r rm -f
}

# The postgres OS user must be able to reach data directories under the repo,
# which may sit below a root-only home directory (e.g. /root). Open only the
# search (x) bit on each ancestor, never read access.
ensure_postgres_can_reach() {
  local dir="$1" d
  if as_postgres test -x "$dir" 2>/dev/null; then return 0; fi
  info "granting the postgres user passage (o+x) to $dir and its parents"
  d="$dir"
  while [ "$d" != "/" ]; do
    chmod o+x "$d"
    d="$(dirname "$d")"
  done
}

# cluster_start NAME PORT DBNAME: an initdb'd cluster under $ENGRAM_HOME/NAME,
# run as postgres, pg_cron (for DBNAME) and engram preloaded, sockets under the cluster dir,
# TCP on ENGRAM_LISTEN_ADDRESSES (127.0.0.1; the container image listens on *).
cluster_dir() { echo "$ENGRAM_HOME/$1"; }

cluster_start() {
  local name="$1" port="$2" db="$3"
  local dir; dir="$(cluster_dir "$name")"
  local data="$dir/pgdata" sock="$dir/run"
  mkdir -p "$dir" "$sock"
  chown postgres:postgres "$dir" "$sock"
  ensure_postgres_can_reach "$dir"
  if [ ! -s "$data/PG_VERSION" ]; then
    step "initdb: new cluster '$name' in $data"
    as_postgres "$PG_BIN/initdb" -D "$data" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      die "initdb failed; see $dir/initdb.log" "remove $dir to start over"
  fi
  # Rewritten on every start so that a changed port or database name applies.
  local conf_new="$dir/engram.conf.new"
  cat >"$conf_new" <<CONF
# Written by scripts/lib.sh (cluster_start); edits are overwritten.
port = $port
listen_addresses = '${ENGRAM_LISTEN_ADDRESSES-127.0.0.1}'
unix_socket_directories = '$sock'
shared_preload_libraries = '${ENGRAM_PRELOAD:-pg_cron,engram}'
cron.database_name = '$db'
max_connections = 200
shared_buffers = 1GB
maintenance_work_mem = 1GB
max_parallel_maintenance_workers = 2
log_min_messages = warning
${ENGRAM_EXTRA_CONF:-}
CONF
  local changed=0
  cmp -s "$conf_new" "$data/engram.conf" || changed=1
  mv "$conf_new" "$data/engram.conf"
  chown postgres:postgres "$data/engram.conf"
  grep -q "^include_if_exists = 'engram.conf'" "$data/postgresql.conf" ||
    echo "include_if_exists = 'engram.conf'" >>"$data/postgresql.conf"
  # engram is preloaded: a running postmaster keeps the library it started
  # with (every backend is forked from it), so a newer engram.so needs a
  # restart too.
  local lib; lib="$("$PG_CONFIG" --pkglibdir)/engram.so"
  if [ -f "$data/postmaster.pid" ] && [ -f "$lib" ] && [ "$lib" -nt "$data/postmaster.pid" ]; then
    changed=1
  fi
  if as_postgres "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    if [ "$changed" = 1 ]; then
      info "cluster '$name' running; restarting it to apply changed settings or a new engram library"
      as_postgres "$PG_BIN/pg_ctl" -D "$data" -w -m fast restart -l "$dir/postgres.log" >/dev/null ||
        die "could not restart cluster '$name'; see $dir/postgres.log"
    else
      info "cluster '$name' already running on port $port"
    fi
  else
    step "starting cluster '$name' on port $port"
    as_postgres "$PG_BIN/pg_ctl" -D "$data" -w -t 60 start -l "$dir/postgres.log" >/dev/null ||
      die "postgres did not start; see $dir/postgres.log" \
        "is port $port taken? set ENGRAM_PGPORT to another port"
  fi
}

# cluster_replica PRIMARY PRIMARY_PORT NAME PORT: a new streaming hot standby
# of cluster PRIMARY under $ENGRAM_HOME/NAME (pg_basebackup -R: it connects
# back over PRIMARY's socket as postgres), started on PORT. Replaces any
# earlier NAME.
cluster_replica() {
  local primary="$1" primary_port="$2" name="$3" port="$4"
  local dir; dir="$(cluster_dir "$name")"
  local data="$dir/pgdata" sock="$dir/run"
  cluster_stop "$name"
  rm -rf "$dir"
  mkdir -p "$dir" "$sock"
  chown postgres:postgres "$dir" "$sock"
  ensure_postgres_can_reach "$dir"
  step "streaming standby '$name' of '$primary' on port $port (pg_basebackup -R)"
  as_postgres "$PG_BIN/pg_basebackup" -h "$(cluster_dir "$primary")/run" -p "$primary_port" -U postgres \
    -D "$data" -R -X stream -c fast >"$dir/basebackup.log" 2>&1 ||
    die "pg_basebackup failed; see $dir/basebackup.log"
  # The primary's engram.conf came along; the standby gets its own port and socket.
  sed -i -e "s|^port = .*|port = $port|" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$sock'|" \
    "$data/engram.conf"
  echo "hot_standby = on" >>"$data/engram.conf"
  as_postgres "$PG_BIN/pg_ctl" -D "$data" -w -t 60 start -l "$dir/postgres.log" >/dev/null ||
    die "the standby did not start; see $dir/postgres.log"
}

cluster_stop() {
  local data; data="$(cluster_dir "$1")/pgdata"
  if [ -s "$data/PG_VERSION" ] && as_postgres "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_postgres "$PG_BIN/pg_ctl" -D "$data" -w -m fast stop >/dev/null
  fi
}

# psql against a cluster as the postgres superuser: cluster_psql NAME PORT DB [psql args]
cluster_psql() {
  local name="$1" port="$2" db="$3"; shift 3
  psql -X -v ON_ERROR_STOP=1 -q -h "$(cluster_dir "$name")/run" -p "$port" -U postgres -d "$db" "$@"
}

# cluster_create_db NAME PORT DB: the database, pg_cron and engram in it.
cluster_create_db() {
  local name="$1" port="$2" db="$3"
  if [ "$(cluster_psql "$name" "$port" postgres -tAc "select 1 from pg_database where datname = '$db'")" != 1 ]; then
    step "creating database '$db'"
    cluster_psql "$name" "$port" postgres -c "create database \"$db\""
  fi
  cluster_psql "$name" "$port" "$db" -c "create extension if not exists pg_cron" \
    -c "create extension if not exists engram cascade" ||
    die "could not create the extensions in '$db'" "see $(cluster_dir "$name")/postgres.log"
}

# cluster_login_role NAME PORT ROLE: a LOGIN role that is a member of
# engram_agent only (the restricted role the extension creates): what
# engram-mcp and applications log in as. Never a superuser.
cluster_login_role() {
  local name="$1" port="$2" role="$3"
  cluster_psql "$name" "$port" postgres -c "do \$\$ begin
      if not exists (select 1 from pg_roles where rolname = '$role') then
        create role $role login in role engram_agent;
      end if; end \$\$"
}
