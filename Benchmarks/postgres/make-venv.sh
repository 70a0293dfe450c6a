#!/usr/bin/env bash
# Makes the venv that `liaison-bench postgres` runs its Python peers from: .build-venv at the
# package's root (ignored by git, as every .build-*), with
#   psycopg 3 and its binary libpq      psycopg_peer.py, and the job-queue peer's own watcher
#   procrastinate (on psycopg 3)        job_queue_peer.py --library procrastinate
#   pgqueuer with asyncpg               job_queue_peer.py --library pgqueuer
# all in one venv: their requirements agree (both take psycopg 3 as it is). Unattended (pip asks
# nothing); prints the versions it installed.
#
#   Benchmarks/postgres/make-venv.sh            (PYTHON=python3.12 … to choose the interpreter)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.build-venv"
"${PYTHON:-python3}" -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
"$venv/bin/pip" install --quiet --upgrade pip
# The ranges the peers were written and checked against (procrastinate 3.10, pgqueuer 1.6).
"$venv/bin/pip" install --quiet 'psycopg[binary]>=3.2,<4' 'procrastinate>=3.10,<4' 'pgqueuer[asyncpg]>=1.6,<2'
"$venv/bin/python" - "$venv" <<'PYTHON'
import sys
from importlib.metadata import version
import psycopg
print("psycopg", psycopg.__version__, "(" + psycopg.pq.__impl__ + "),",
      ", ".join(f"{name} {version(name)}" for name in ("procrastinate", "pgqueuer", "asyncpg")), "in", sys.argv[1])
PYTHON
