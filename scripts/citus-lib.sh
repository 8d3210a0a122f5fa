# Citus helpers for scripts/citus and scripts/test. Source it after lib.sh.
CITUS_PORT="${ENGRAM_CITUS_PORT:-$(pg_port 5440)}"
CITUS_NAME="${ENGRAM_CITUS_NAME:-citus}"
CITUS_WORKERS=(w1 w2)

citus_installed() {
  [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] && [ -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]
}

# The archive engram's CI builds Citus from when no Citus is installed:
# CITUS_SOURCE, else the vendored copy next to the repository
# (../shared/vendor), else the one next to the repository this clone came
# from. CI works in a fresh clone whose directory may have no ../shared, and
# without an archive the Citus stage is skipped with a warning and CI passes.
citus_default_source() {
  if [ -n "${CITUS_SOURCE:-}" ]; then echo "$CITUS_SOURCE"; return; fi
  local archive=shared/vendor/citus-13.2.2.tar.gz origin dir
  origin="$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)"
  origin="${origin#file://}"
  for dir in "$ROOT/.." ${origin:+"$origin/.."}; do
    case "$dir" in /*) ;; *) continue ;; esac
    if [ -f "$dir/$archive" ]; then
      echo "$(cd "$dir" && pwd)/$archive"
      return
    fi
  done
}

# citus_install: nothing when Citus is installed; otherwise builds the source
# archive (CITUS_SOURCE or the vendored copy) against this PostgreSQL and
# installs it. Fails with what to do when there is neither.
citus_install() {
  if citus_installed; then
    info "Citus present ($(sed -n "s/^default_version = '\(.*\)'/\1/p" "$("$PG_CONFIG" --sharedir)/extension/citus.control"))"
    return
  fi
  local src; src="$(citus_default_source)"
  [ -n "$src" ] && [ -f "$src" ] || die "Citus is not installed and there is no source archive to build it from" \
    "install Citus's package for PostgreSQL $PG_MAJOR (https://docs.citusdata.com), or set CITUS_SOURCE=path/to/citus.tar.gz"
  local want=(libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev)
  local missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt: installing Citus's build dependencies: ${missing[*]}"
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
      die "apt-get install failed for: ${missing[*]}"
  fi
  local build="/var/cache/engram/citus-build$PG_SUFFIX"
  step "building Citus from $src (about 3 minutes on 2 cores; output in $build/build.log)"
  rm -rf "$build" && mkdir -p "$build/src"
  tar -xzf "$src" -C "$build/src"
  local dir="$build/src"
  [ -f "$dir/configure" ] || dir="$(find "$build/src" -mindepth 1 -maxdepth 1 -type d | head -1)"
  [ -f "$dir/configure" ] || die "$src does not look like Citus's source (no configure script)"
  # PostgreSQL 15.20's headers declare have_createdb_privilege(), which
  # Citus 13.2's compatibility header also defines as a static inline for
  # PG 15: drop Citus's copy (the server's exported function does the same).
  if grep -q "extern bool have_createdb_privilege" "$("$PG_CONFIG" --includedir-server)/commands/dbcommands.h" 2>/dev/null; then
    perl -0pi -e 's/static inline bool\s*\nhave_createdb_privilege\(void\)\s*\n\{.*?\n\}\n//s' \
      "$dir/src/include/pg_version_compat.h"
  fi
  (cd "$dir" && ./configure PG_CONFIG="$PG_CONFIG" >"$build/build.log" 2>&1 &&
    make -j"$(nproc)" >>"$build/build.log" 2>&1 && make install >>"$build/build.log" 2>&1) ||
    die "building Citus failed" "see $build/build.log"
  citus_installed || die "Citus built but citus.so is not in $("$PG_CONFIG" --pkglibdir)" "see $build/build.log"
  info "Citus installed"
}

citus_node_port() { # coord | w1 | w2 | w3 ...
  case "$1" in coord) echo "$CITUS_PORT" ;; w*) echo $((CITUS_PORT + ${1#w})) ;; esac
}
citus_node_dir() { cluster_dir "$CITUS_NAME-$1"; }

# citus_node_start NODE DB: one node, citus first in shared_preload_libraries.
# Nodes reach each other over their Unix sockets (node names are socket
# directories), so no password travels between them.
citus_node_start() {
  local node="$1" db="$2"
  # citus.local_hostname: how a node reaches itself (its socket directory).
  # max_worker_processes: every database with citus runs a maintenance
  # daemon, and the rebalancer's background task executor needs a slot too;
  # Postgres's 8 run out with a handful of databases. max_connections: the
  # workers' daemons keep a connection to the coordinator per database.
  ENGRAM_PRELOAD="citus,pg_cron,engram" ENGRAM_EXTRA_CONF="citus.local_hostname = '$(citus_node_dir "$node")/run'
citus.shard_count = 32
max_prepared_transactions = 100
wal_level = logical
max_worker_processes = 64
max_connections = 400" \
    cluster_start "$CITUS_NAME-$node" "$(citus_node_port "$node")" "$db"
}

citus_psql() { # NODE DB [psql args]
  local node="$1" db="$2"; shift 2
  cluster_psql "$CITUS_NAME-$node" "$(citus_node_port "$node")" "$db" "$@"
}

# citus_cluster_up DB SHARDS: the nodes started, DB on each with citus
# (and pg_cron on the coordinator), the workers added, engram created on the
# coordinator (Citus creates it on the workers) and distributed.
citus_cluster_up() {
  local db="$1" shards="$2" node
  for node in coord "${CITUS_WORKERS[@]}"; do
    citus_node_start "$node" "$db"
  done
  citus_db_up "$db" "$shards"
  citus_psql coord "$db" -c "create extension if not exists pg_cron" ||
    die "could not create pg_cron on the coordinator" "see $(citus_node_dir coord)/postgres.log"
  citus_login_role "$db" engram_mcp
}

# citus_db_up DB SHARDS: DB with citus on every (started) node, the workers
# added, engram created on the coordinator (Citus creates it on the workers)
# and distributed over SHARDS shards. Idempotent.
citus_db_up() {
  local db="$1" shards="$2" node
  for node in coord "${CITUS_WORKERS[@]}"; do
    if [ "$(citus_psql "$node" postgres -tAc "select 1 from pg_database where datname = '$db'")" != 1 ]; then
      citus_psql "$node" postgres -c "create database \"$db\""
    fi
    citus_psql "$node" "$db" -c "create extension if not exists citus"
  done
  citus_psql coord "$db" -c "select citus_set_coordinator_host('$(citus_node_dir coord)/run', $CITUS_PORT)" >/dev/null
  for node in "${CITUS_WORKERS[@]}"; do
    citus_psql coord "$db" -tAc "select citus_add_node('$(citus_node_dir "$node")/run', $(citus_node_port "$node"))" >/dev/null
  done
  citus_psql coord "$db" -c "create extension if not exists engram cascade" ||
    die "could not create engram on the coordinator" "see $(citus_node_dir coord)/postgres.log"
  step "engram.distribute(shard_count => $shards) in '$db'"
  citus_psql coord "$db" -tAc "select engram.distribute(shard_count => $shards)"
}

# citus_login_role DB ROLE: like cluster_login_role, on every node (made in
# a database with citus, which propagates roles to the workers).
citus_login_role() {
  local db="$1" role="$2"
  citus_psql coord "$db" -c "do \$\$ begin
      if not exists (select 1 from pg_roles where rolname = '$role') then
        create role $role login in role engram_agent;
      end if; end \$\$"
}

citus_stop_all() {
  local d
  for d in "$ENGRAM_HOME/$CITUS_NAME"-*/; do
    [ -d "$d" ] && cluster_stop "$(basename "$d")"
  done
  return 0
}

# citus_template SHARDS: the database engram_template on every node with
# engram distributed (SHARDS shards), closed to connections so that the
# integration tests copy it on each node (CREATE DATABASE ... TEMPLATE),
# as tests/src/lib.rs does in Citus mode.
citus_template() {
  local shards="$1" node
  # Made anew on every run: a kept cluster's template is closed to
  # connections, and may hold an older engram.
  for node in coord "${CITUS_WORKERS[@]}"; do
    citus_psql "$node" postgres -qc "drop database if exists engram_template with (force)"
  done
  citus_db_up engram_template "$shards" >/dev/null
  citus_login_role engram_template engram_app
  citus_login_role engram_template engram_mcp
  # Citus's maintenance daemon keeps a connection to every database with
  # citus; a template must have none.
  for node in coord "${CITUS_WORKERS[@]}"; do
    citus_psql "$node" postgres -c "alter database engram_template with allow_connections false" \
      -tAc "select count(pg_terminate_backend(pid)) from pg_stat_activity where datname = 'engram_template'" >/dev/null
  done
}

# The tests docs/SCALING.md lists under "Tests that do not run on Citus", as
# cargo test --skip arguments.
citus_skipped_tests() {
  sed -n '/^## Tests that do not run on Citus/,/^## [^T]/p' "$ROOT/docs/SCALING.md" |
    grep -o '^| `[a-z0-9_]*`' | tr -d '|` ' | sed 's/^/--skip /'
}

# The MCP tests (tests/mcp) the same section lists, as pytest --deselect
# arguments (a file, or file::test).
citus_skipped_mcp_tests() {
  sed -n '/^## Tests that do not run on Citus/,/^## [^T]/p' "$ROOT/docs/SCALING.md" |
    grep -o '^| `test_[a-z0-9_]*\.py[a-z0-9_:]*`' | tr -d '|` ' | sed 's/^/--deselect /'
}

# citus_drop_databases PATTERN: drops the databases whose names match the
# SQL regular expression PATTERN on every node (the test suites' copies):
# each database with citus keeps a maintenance daemon per node, and the
# workers' daemons a connection to the coordinator.
citus_drop_databases() {
  local pattern="$1" node db
  for node in coord "${CITUS_WORKERS[@]}"; do
    for db in $(citus_psql "$node" postgres -tAc "select datname from pg_database where datname ~ '$pattern'"); do
      citus_psql "$node" postgres -qc "drop database \"$db\" with (force)" >/dev/null
    done
  done
}
