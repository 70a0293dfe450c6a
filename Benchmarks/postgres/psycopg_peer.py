#!/usr/bin/env python3
"""The psycopg peer of `liaison-bench postgres`: what a Python user would otherwise write.

    .build-venv/bin/python Benchmarks/postgres/psycopg_peer.py --url postgres://USER@HOST:PORT/DB

Measures, on one autocommit connection and in interleaved samples (nanoseconds per operation):

    psycopg.select1             one SELECT 1 round trip (psycopg's own floor)
    psycopg.try-advisory-pair   pg_try_advisory_lock + pg_advisory_unlock (2 round trips)
    psycopg.advisory-pair       pg_advisory_lock + pg_advisory_unlock (2 round trips)

and, one way, to a second process (this script with --listen) iterating Connection.notifies(),
each payload the sending time on the monotonic clock (the clock liaison-bench reads), interleaved:

    psycopg.notify-listen        SELECT pg_notify(…) here -> the notification there
    psycopg.insert-notify-listen INSERT a row and pg_notify in one statement (one commit, its WAL
                                 flush) here -> the notification there
    psycopg.insert-notify-claim  the same -> the notification there, then the row claimed and
                                 deleted there (DELETE … FOR UPDATE SKIP LOCKED … RETURNING, one
                                 more commit) on a second connection: the least a durable queue
                                 on PostgreSQL does between a send and its receipt

The rows go to a table of its own, liaison_bench_psycopg_PID, dropped at the end. Prints one JSON object on standard output:
{"python", "psycopg", "implementation", "libpq", "samples": {NAME: [nanoseconds, ...]}}; the
bench computes medians and p99 from the samples as it does for its own.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import psycopg

# The first key of these advisory locks ("LIPY"), apart from Liaison's and the bench's floors.
LOCK_CLASS = 0x4C49_5059
CHANNEL = "liaison_bench_psycopg"


def batch(operations, body):
    start = time.monotonic_ns()
    for _ in range(operations):
        body()
    return (time.monotonic_ns() - start) / operations


def measure(url, samples, operations, notify_samples):
    connection = psycopg.connect(url, autocommit=True)
    cursor = connection.cursor()

    def select1():
        cursor.execute("SELECT 1")
        cursor.fetchall()

    def try_pair():
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, 1))
        if not cursor.fetchone()[0]:
            raise RuntimeError("the advisory lock is taken")
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, 1))
        cursor.fetchone()

    def pair():
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, 1))
        cursor.fetchone()
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, 1))
        cursor.fetchone()

    bodies = {"psycopg.select1": select1, "psycopg.try-advisory-pair": try_pair, "psycopg.advisory-pair": pair}
    for body in bodies.values():  # warm up (psycopg prepares a statement on its 5th run)
        batch(10, body)
    results = {name: [] for name in bodies}
    for _ in range(samples):
        for name, body in bodies.items():
            results[name].append(batch(operations, body))

    table = f"liaison_bench_psycopg_{os.getpid()}"
    connection.execute(f"CREATE TABLE {table} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sent bigint, claim boolean)")
    listener = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--url", url, "--listen", "--table", table],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        if listener.stdout.readline().strip() != "ready":
            raise RuntimeError("the listening process did not start")
        insert = (f"WITH sent AS (INSERT INTO {table} (sent, claim) VALUES (%s, %s) RETURNING sent) "
                  "SELECT pg_notify(%s, %s || sent::text) FROM sent")
        kinds = {
            "psycopg.notify-listen": lambda: connection.execute(
                "SELECT pg_notify(%s, %s)", (CHANNEL, "n" + str(time.monotonic_ns()))),
            "psycopg.insert-notify-listen": lambda: connection.execute(
                insert, (time.monotonic_ns(), False, CHANNEL, "n")),
            "psycopg.insert-notify-claim": lambda: connection.execute(
                insert, (time.monotonic_ns(), True, CHANNEL, "c")),
        }
        for name in kinds:
            results[name] = []
        for index in range(notify_samples + 20):  # the first 20 of each warm up
            for name, send in kinds.items():
                send()
                line = listener.stdout.readline()
                if not line:
                    raise RuntimeError("the listening process ended")
                if index >= 20:
                    results[name].append(float(line))
    finally:
        try:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
        except psycopg.Error:
            pass
        listener.stdin.close()
        try:
            listener.wait(timeout=10)
        except subprocess.TimeoutExpired:
            listener.kill()
            listener.wait()
    connection.close()
    return results


def listen(url, table):
    """Answers each notification with the nanoseconds since its payload's time (after claiming
    the oldest claimable row of the table when the payload starts with c); ends when its standard input
    closes or its parent is gone."""
    parent = os.getppid()
    connection = psycopg.connect(url, autocommit=True)
    claimer = psycopg.connect(url, autocommit=True)
    claim = (f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} WHERE claim ORDER BY id "
             "FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING sent")
    connection.execute(f"LISTEN {CHANNEL}")
    print("ready", flush=True)
    os.set_blocking(sys.stdin.fileno(), False)
    while True:
        for notification in connection.notifies(timeout=0.5):
            sent = int(notification.payload[1:])
            if notification.payload[0] == "c":
                row = claimer.execute(claim).fetchone()
                sent = row[0] if row else sent
            print(time.monotonic_ns() - sent, flush=True)
        try:
            if os.read(sys.stdin.fileno(), 1) == b"":
                return
        except BlockingIOError:
            pass
        if os.getppid() != parent:
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="postgres://USER@HOST:PORT/DATABASE")
    parser.add_argument("--samples", type=int, default=100, help="samples of each pair (default 100)")
    parser.add_argument("--batch", type=int, default=20, help="operations per sample (default 20)")
    parser.add_argument("--notify-samples", type=int, default=600, help="notifications of each kind (default 600)")
    parser.add_argument("--listen", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.listen:
        listen(arguments.url, arguments.table)
        return
    samples = measure(arguments.url, arguments.samples, arguments.batch, arguments.notify_samples)
    print(json.dumps({
        "python": platform.python_version(),
        "psycopg": psycopg.__version__,
        "implementation": psycopg.pq.__impl__,
        "libpq": psycopg.pq.version(),
        "samples": samples,
    }))


if __name__ == "__main__":
    main()
