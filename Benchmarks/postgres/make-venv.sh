#!/usr/bin/env bash
# Makes the venv that `liaison-bench postgres` runs its psycopg peer from: .build-venv at the
# package's root (ignored by git, as every .build-*), with psycopg 3 and its binary libpq.
#
#   Benchmarks/postgres/make-venv.sh            (PYTHON=python3.12 … to choose the interpreter)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.build-venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet 'psycopg[binary]>=3.2,<4'
"$venv/bin/python" -c 'import psycopg; print("psycopg", psycopg.__version__, "(" + psycopg.pq.__impl__ + ") in '"$venv"'")'
