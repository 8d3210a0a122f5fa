#!/usr/bin/env bash
# The database container's entrypoint (docker/Dockerfile): the same cluster
# functions scripts/setup and scripts/run use (scripts/lib.sh), then
# PostgreSQL in the foreground.
#
# First start: initdb under $ENGRAM_HOME/main (the volume), pg_cron
# preloaded for $ENGRAM_DB, the database with pg_cron and engram, the login
# role engram_mcp (a member of engram_agent only) with $ENGRAM_MCP_PASSWORD,
# password logins from the container network, and a platform token for
# $ENGRAM_OWNER written to $ENGRAM_HOME/token (mode 600, never logged).
# Later starts: ALTER EXTENSION engram UPDATE (a newer image upgrades the
# database in place), then serve.
#
# Environment: ENGRAM_DB (engram), ENGRAM_PGPORT (5432), ENGRAM_MCP_PASSWORD
# (required), ENGRAM_OWNER (local), ENGRAM_HOME (/var/lib/engram).
set -euo pipefail
export ENGRAM_HOME="${ENGRAM_HOME:-/var/lib/engram}"
# Served on these addresses once initialised; the set-up below runs with no
# TCP listener at all, so that no client (engram-mcp, a healthcheck) sees
# the temporary server it stops again.
LISTEN="${ENGRAM_LISTEN_ADDRESSES:-*}"
export ENGRAM_LISTEN_ADDRESSES=""
# shellcheck source=../scripts/lib.sh
source "${ENGRAM_LIB:-/opt/engram/scripts/lib.sh}"

DB="${ENGRAM_DB:-engram}"
PORT="${ENGRAM_PGPORT:-5432}"
OWNER="${ENGRAM_OWNER:-local}"
[ -n "${ENGRAM_MCP_PASSWORD:-}" ] ||
  die "ENGRAM_MCP_PASSWORD is not set" "give the engram_mcp login role a password (compose.yaml reads it from .env)"

mkdir -p "$ENGRAM_HOME"
chown postgres:postgres "$ENGRAM_HOME"
# The healthcheck's signal: present only while the final server runs.
READY="$ENGRAM_HOME/ready"
rm -f "$READY"
cluster_start main "$PORT" "$DB"
cluster_create_db main "$PORT" "$DB"
PGOPTIONS='-c client_min_messages=warning' cluster_psql main "$PORT" "$DB" -c "alter extension engram update"
cluster_login_role main "$PORT" engram_mcp
cluster_psql main "$PORT" postgres -v pw="$ENGRAM_MCP_PASSWORD" <<'SQL'
ALTER ROLE engram_mcp PASSWORD :'pw';
SQL
# Password (scram) logins over TCP from anywhere the container is reachable;
# the superuser only over the local socket.
HBA="$(cluster_dir main)/pgdata/pg_hba.conf"
if ! grep -q "^# engram: container network" "$HBA"; then
  cat >>"$HBA" <<'HBA'
# engram: container network
host    all    postgres    0.0.0.0/0    reject
host    all    postgres    ::/0         reject
host    all    all         0.0.0.0/0    scram-sha-256
host    all    all         ::/0         scram-sha-256
HBA
fi
TOKEN_FILE="$ENGRAM_HOME/token"
if [ ! -s "$TOKEN_FILE" ]; then
  umask 077
  cluster_psql main "$PORT" "$DB" -tA -v owner="$OWNER" >"$TOKEN_FILE" <<'SQL'
select engram.create_token(owner => :'owner', label => 'docker', platform => true);
SQL
  # Not printed: container logs travel further than the volume.
  info "platform token for owner '$OWNER' written to $TOKEN_FILE (mode 600); read it with: cat $TOKEN_FILE"
fi
cluster_stop main
sed -i "s|^listen_addresses = .*|listen_addresses = '$LISTEN'|" "$(cluster_dir main)/pgdata/engram.conf"
step "serving '$DB' on port $PORT (listening on '$LISTEN')"
touch "$READY"
# setpriv, not runuser: postgres itself becomes the container's first
# process and gets the stop signal (SIGINT: a fast shutdown with a
# checkpoint); runuser would stay in between and pass nothing on.
exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$PG_BIN/postgres" -D "$(cluster_dir main)/pgdata"
