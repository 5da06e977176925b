#!/usr/bin/env bash
# Makes sure the services the cluster tests use are installed and running:
# PostgreSQL on 127.0.0.1:5432 with a database `test` that the user
# `postgres` (password `postgres`) can use, and Redis on 127.0.0.1:6379.
# Machines that already run them are left as they are. Safe to run again.
set -euo pipefail

PG_URL="${BUBBLE_TEST_POSTGRES:-postgres://postgres:postgres@127.0.0.1:5432/test}"

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v pg_ctlcluster >/dev/null || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis on 127.0.0.1:6379"
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "starting PostgreSQL on 127.0.0.1:5432"
  read -r version cluster _ < <(pg_lsclusters --no-header | head -n 1)
  pg_ctlcluster "$version" "$cluster" start
  for _ in $(seq 100); do
    pg_isready -q -h 127.0.0.1 -p 5432 && break
    sleep 0.1
  done
fi

if ! psql "$PG_URL" -qtAc 'select 1' >/dev/null 2>&1; then
  echo "preparing PostgreSQL: user postgres with a password, database test"
  su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\""
  su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1 \
    || su postgres -c "createdb test"
  psql "$PG_URL" -qtAc 'select 1' >/dev/null
fi
