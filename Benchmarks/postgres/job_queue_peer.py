#!/usr/bin/env python3
"""The job-queue peers of `liaison-bench postgres`: Procrastinate and PgQueuer, the libraries a
Python user would pick instead of a Liaison mailbox.

    .build-venv/bin/python Benchmarks/postgres/job_queue_peer.py --library procrastinate --url URL
    .build-venv/bin/python Benchmarks/postgres/job_queue_peer.py --library pgqueuer --url URL

Each run works in a schema of its own, liaison_bench_LIBRARY_PID (the connections' search_path),
where the library's own installer makes its tables (Procrastinate's SchemaManager.apply_schema,
the `procrastinate schema --apply` of its CLI; PgQueuer's Queries.install, the `pgq install` of its
CLI); the schema is dropped at the end, and the server checkpointed before and after (where the
role may) so that no peer's writes slow the commits measured after it. Two figures, each from a worker in another process (this
script with --worker), woken the way each library recommends (LISTEN/NOTIFY, its polling only a
fallback):

    peer.LIBRARY.latency      enqueue one job -> its function starts in the worker, one way, in
                              nanoseconds: each job carries the time it was sent on the monotonic
                              clock (CLOCK_MONOTONIC, shared by the processes of one host), the
                              worker answers at the start of the job function, and the next job is
                              sent only after that answer and a short pause (--pause-ms): the
                              worker waits for it, though it may still be acknowledging the one
                              before (Procrastinate's finish commit can outlast a 2 ms pause).
                              Warmed up first.
    peer.LIBRARY.throughput   jobs enqueued in batches of --batch through the library's batch
                              API (Procrastinate Task.batch_defer_async, PgQueuer Queries.enqueue
                              with lists), consumed by one worker with the settings below: jobs per
                              second from before the first enqueue to the start of the last job's
                              function (received, as the worker sees it; unacknowledged). After
                              two warm-up groups (one batch, then sized), each group has as many
                              jobs as the group before got through in --seconds (at most
                              --jobs), so a slow library still ends in seconds.
    peer.LIBRARY.throughput-acked  the same jobs, to the moment the database shows every one of
                              them finished (Procrastinate: no job left 'todo' or 'doing'; PgQueuer:
                              the queue table empty, its jobs moved to its log), polled every
                              millisecond: received and acknowledged.

With --figures producers and --producers N (for `liaison-bench postgres-scale`):

    peer.LIBRARY.producers-N  N producer processes (this script with --producer) at once, each
                              enqueueing its share of --jobs one job at a time, each job carrying
                              its send time; one worker in throughput mode: jobs per second from
                              the start until the worker's function has started the last job
                              (received, unacknowledged). --throughput-samples samples.
    peer.LIBRARY.producers-N-latency  each of those jobs' enqueue until its function started, in
                              nanoseconds (CLOCK_MONOTONIC).

Prints one JSON object per line, one per figure: {"name", "unit" ("ns" or "jobs/s"), "samples":
[...], "median", "p90", "p99", "count", "library", "driver", "settings"}, then exits 0. On any
failure it says what failed on standard error and exits non-zero; every wait has a timeout.
"""

import argparse
import asyncio
import json
import os
import platform
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

LIBRARIES = ("procrastinate", "pgqueuer")
TASK = "liaison_bench_job"


class PeerError(Exception):
    pass


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


# MARK: - The libraries


class Procrastinate:
    """Procrastinate on psycopg 3 (its PsycopgConnector: a psycopg_pool.AsyncConnectionPool).

    Per job: the defer is 1 statement (procrastinate_defer_jobs_v1, an INSERT whose trigger
    NOTIFYs and writes an event row), committed; the worker's fetch is 1 statement
    (procrastinate_fetch_job_v2: UPDATE … FOR UPDATE SKIP LOCKED, one job a call), committed;
    its finish is 1 statement (procrastinate_finish_job), committed. Jobs are kept (delete_jobs
    never, the default)."""

    name = "procrastinate"

    def __init__(self, url, schema):
        import procrastinate
        import psycopg

        self.module = procrastinate
        self.version = procrastinate.__version__ if hasattr(procrastinate, "__version__") else _dist("procrastinate")
        self.driver = f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=url, kwargs={"options": f"-c search_path={schema}"}, min_size=1, max_size=10))
        self.received = None
        app = self.app

        @app.task(name=TASK)
        async def job(**payload):
            self.received(payload)

        self.task = job

    async def open(self):
        await self.app.open_async()

    async def close(self):
        await self.app.close_async()

    async def install(self):
        await self.app.schema_manager.apply_schema_async()

    async def enqueue(self, payloads):
        if len(payloads) == 1:
            await self.task.defer_async(**payloads[0])
        else:
            await self.task.batch_defer_async(*payloads)

    async def pending(self, connection):
        cursor = await connection.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
        return (await cursor.fetchone())[0]

    def settings(self, throughput, concurrency, batch):
        return (f"worker concurrency={concurrency if throughput else 1}, listen_notify=True, "
                "fetch_job_polling_interval=5 s (default, the fallback when no NOTIFY comes), "
                "delete_jobs=never (default), PsycopgConnector pool of 1-10 connections")

    async def work(self, received, throughput, concurrency, batch):
        self.received = received
        await self.app.run_worker_async(
            concurrency=concurrency if throughput else 1, wait=True, listen_notify=True,
            install_signal_handlers=False)


class PgQueuer:
    """PgQueuer on asyncpg (the driver its documentation starts from).

    Per job: the enqueue is 1 statement (an INSERT … SELECT unnest(…) for a batch; the queue
    table's trigger NOTIFYs), committed; the worker's dequeue is 1 statement for up to batch_size
    jobs (UPDATE … FOR UPDATE SKIP LOCKED), committed; each finished job goes to a buffer that
    writes its log row and deletes it from the queue in 1 statement per batch_size jobs or every
    0.1 s (TimedOverflowBuffer's timeout), committed."""

    name = "pgqueuer"

    def __init__(self, url, schema):
        import asyncpg
        import pgqueuer

        self.asyncpg = asyncpg
        self.pgqueuer = pgqueuer
        self.url = url
        self.schema = schema
        self.version = _dist("pgqueuer")
        self.driver = f"asyncpg {asyncpg.__version__}"
        self.connection = None

    async def connect(self):
        return await self.asyncpg.connect(self.url, server_settings={"search_path": self.schema})

    async def open(self):
        from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
        from pgqueuer.queries import Queries

        self.connection = await self.connect()
        self.queries = Queries(AsyncpgDriver(self.connection))

    async def close(self):
        if self.connection is not None:
            await self.connection.close()

    async def install(self):
        await self.queries.install()

    async def enqueue(self, payloads):
        encoded = [json.dumps(payload).encode() for payload in payloads]
        if len(encoded) == 1:
            await self.queries.enqueue(TASK, encoded[0])
        else:
            await self.queries.enqueue([TASK] * len(encoded), encoded, [0] * len(encoded))

    async def pending(self, connection):
        cursor = await connection.execute("SELECT count(*) FROM pgqueuer")
        return (await cursor.fetchone())[0]

    def settings(self, throughput, concurrency, batch):
        size = batch if throughput else 10
        return (f"QueueManager.run batch_size={size}{'' if throughput else ' (default)'}, "
                "max_concurrent_tasks unlimited (default), dequeue_timeout=30 s (default, the fallback "
                "when no NOTIFY comes), durability=durable (default), completion log buffered "
                f"(flushed at {size} jobs or every 0.1 s)")

    async def work(self, received, throughput, concurrency, batch):
        from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver

        connection = await self.connect()
        queuer = self.pgqueuer.PgQueuer(AsyncpgDriver(connection))

        @queuer.entrypoint(TASK)
        async def job(job):
            received(json.loads(job.payload))

        await queuer.run(batch_size=batch if throughput else 10)


def _dist(name):
    from importlib.metadata import version

    return version(name)


def make(library, url, schema):
    try:
        return (Procrastinate if library == "procrastinate" else PgQueuer)(url, schema)
    except ImportError as error:
        raise PeerError(
            f"{library} is not installed in {sys.prefix} ({error}); run Benchmarks/postgres/make-venv.sh") from error


# MARK: - The worker process


def worker(arguments):
    """Runs the library's worker; writes a line to standard output for each job (latency) or for
    each finished group of jobs (throughput). Ends when its standard input closes."""
    out = sys.stdout.fileno()

    def watch_input():
        while os.read(sys.stdin.fileno(), 1024):
            pass
        os._exit(0)

    threading.Thread(target=watch_input, daemon=True).start()
    library = make(arguments.library, arguments.url, arguments.schema)
    counts = {}
    latencies = {}

    def received(payload):
        at = time.monotonic_ns()
        if "n" not in payload:
            os.write(out, f"latency {at - payload['t']}\n".encode())
            return
        group = payload["g"]
        counts[group] = counts.get(group, 0) + 1
        if payload.get("t"):
            latencies.setdefault(group, []).append(at - payload["t"])
        if counts[group] == payload["n"]:
            waited = " ".join(str(value) for value in latencies.pop(group, []))
            os.write(out, f"done {group} {at} {waited}\n".encode())

    async def main():
        await library.open()
        os.write(out, b"ready\n")
        await library.work(received, arguments.mode == "throughput", arguments.concurrency, arguments.batch)

    asyncio.run(main())


class Worker:
    """The worker process, its output read line by line with a timeout."""

    def __init__(self, arguments, mode):
        self.errors = tempfile.TemporaryFile()
        role = "--producer" if mode == "producer" else "--worker"
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), role, "--mode", mode, "--library", arguments.library,
             "--url", arguments.url, "--schema", arguments.schema, "--concurrency", str(arguments.concurrency),
             "--batch", str(arguments.batch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.buffer = b""
        self.timeout = arguments.timeout

    def line(self, what):
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                raise PeerError(f"the worker did not answer within {self.timeout:g} s, waiting for {what}"
                                + self.tail())
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                self.process.wait(timeout=5)
                raise PeerError(f"the worker ended ({self.process.returncode}) while waiting for {what}" + self.tail())
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def tail(self):
        self.errors.seek(0)
        text = self.errors.read().decode(errors="replace").strip()
        return f"; its standard error ends: {text[-2000:]}" if text else ""

    def stop(self):
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


# MARK: - The producer


async def wait_for(coroutine, seconds, what):
    try:
        return await asyncio.wait_for(coroutine, seconds)
    except asyncio.TimeoutError:
        raise PeerError(f"{what} did not finish within {seconds:g} s") from None


async def latency(library, arguments):
    worker = Worker(arguments, "latency")
    watcher = await connect_watcher(arguments)
    try:
        if worker.line("it to start") != "ready":
            raise PeerError("the worker did not start")
        samples = []
        for index in range(arguments.warmup + arguments.latency_samples):
            await wait_for(library.enqueue([{"t": time.monotonic_ns()}]), arguments.timeout, "an enqueue")
            line = worker.line("a job's start")
            if not line.startswith("latency "):
                raise PeerError(f"the worker answered {line!r}")
            if index >= arguments.warmup:
                samples.append(float(line.split()[1]))
            await asyncio.sleep(arguments.pause_ms / 1000)
        await wait_until_finished(library, watcher, arguments.timeout)
        return samples
    finally:
        await watcher.close()
        worker.stop()


async def wait_until_finished(library, watcher, timeout):
    """Polls the library's tables every millisecond until no job is left unfinished."""
    deadline = time.monotonic() + timeout
    while await library.pending(watcher) > 0:
        if time.monotonic() > deadline:
            raise PeerError(f"jobs were still unfinished after {timeout:g} s")
        await asyncio.sleep(0.001)


async def connect_watcher(arguments):
    import psycopg

    return await psycopg.AsyncConnection.connect(
        arguments.url, autocommit=True, options=f"-c search_path={arguments.schema}")


async def throughput(library, arguments):
    worker = Worker(arguments, "throughput")
    watcher = await connect_watcher(arguments)
    try:
        if worker.line("it to start") != "ready":
            raise PeerError("the worker did not start")
        received, acked, sizes = [], [], []
        jobs = arguments.batch  # the first warm-up group: one batch
        warmups = 2
        for group in range(warmups + arguments.throughput_samples):
            start = time.monotonic_ns()
            for first in range(0, jobs, arguments.batch):
                payloads = [{"g": group, "n": jobs, "t": 0}] * min(arguments.batch, jobs - first)
                await wait_for(library.enqueue(payloads), arguments.timeout, "an enqueue")
            line = worker.line(f"the last of {jobs} jobs")
            if line.split()[:2] != ["done", str(group)]:
                raise PeerError(f"the worker answered {line!r}")
            done = int(line.split()[2])
            await wait_until_finished(library, watcher, arguments.timeout)
            finished = time.monotonic_ns()
            rate = jobs / ((done - start) / 1e9)
            if group >= warmups:
                received.append(rate)
                acked.append(jobs / ((finished - start) / 1e9))
                sizes.append(jobs)
            # The next group: as many whole batches as this one's rate gets through in --seconds,
            # at most --jobs.
            jobs = max(1, min(arguments.jobs, int(rate * arguments.seconds)) // arguments.batch) * arguments.batch
        return received, acked, sizes
    finally:
        await watcher.close()
        worker.stop()


def producer(arguments):
    """One of --producers processes: opens the library, says ready, and at each line of its
    standard input ("GROUP TOTAL COUNT") enqueues COUNT jobs one at a time, each its send time,
    then says done. Ends when its standard input closes."""
    async def main():
        library = make(arguments.library, arguments.url, arguments.schema)
        await library.open()
        os.write(sys.stdout.fileno(), b"ready\n")
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            group, total, count = (int(word) for word in line.split())
            for _ in range(count):
                await library.enqueue([{"g": group, "n": total, "t": time.monotonic_ns()}])
            os.write(sys.stdout.fileno(), b"done\n")
        await library.close()

    asyncio.run(main())


async def producers(library, arguments):
    """N producer processes at once, one worker: jobs per second, and each job's latency."""
    count = arguments.producers
    share = arguments.jobs // count
    worker = Worker(arguments, "throughput")
    watcher = await connect_watcher(arguments)
    senders = []
    try:
        if worker.line("it to start") != "ready":
            raise PeerError("the worker did not start")
        for _ in range(count):
            sender = Worker(arguments, "producer")
            senders.append(sender)
            if sender.line("a producer to start") != "ready":
                raise PeerError("a producer did not start")
        rates, waits = [], []
        for group in range(1 + arguments.throughput_samples):  # the first: a warm-up
            start = time.monotonic_ns()
            for sender in senders:
                sender.process.stdin.write(f"{group} {share * count} {share}\n".encode())
                sender.process.stdin.flush()
            line = worker.line(f"the last of {share * count} jobs")
            words = line.split()
            if words[:2] != ["done", str(group)]:
                raise PeerError(f"the worker answered {line!r}")
            for sender in senders:
                if sender.line("a producer's end") != "done":
                    raise PeerError("a producer did not finish")
            await wait_until_finished(library, watcher, arguments.timeout)
            if group >= 1:
                rates.append(share * count / ((int(words[2]) - start) / 1e9))
                waits += [float(word) for word in words[3:]]
        return rates, waits
    finally:
        await watcher.close()
        for sender in senders:
            sender.stop()
        worker.stop()


async def produce(arguments):
    import psycopg

    admin = await psycopg.AsyncConnection.connect(arguments.url, autocommit=True)
    await checkpoint(admin)
    await admin.execute(f"DROP SCHEMA IF EXISTS {arguments.schema} CASCADE")
    await admin.execute(f"CREATE SCHEMA {arguments.schema}")
    library = None
    try:
        library = make(arguments.library, arguments.url, arguments.schema)
        await wait_for(library.open(), arguments.timeout, f"opening {arguments.library}")
        await wait_for(library.install(), arguments.timeout, f"{arguments.library}'s schema install")
        figures = []
        common = {"library": f"{library.name} {library.version}", "driver": library.driver,
                  "python": platform.python_version()}

        def figure(name, unit, samples, settings):
            figures.append(dict(
                name=f"peer.{library.name}.{name}", unit=unit, samples=samples, median=percentile(samples, 0.5),
                p90=percentile(samples, 0.9), p99=percentile(samples, 0.99), count=len(samples), settings=settings,
                **common))

        if "latency" in arguments.figures:
            samples = await latency(library, arguments)
            figure("latency", "ns", samples,
                   library.settings(False, arguments.concurrency, arguments.batch)
                   + f"; {arguments.warmup} warm-up jobs, a pause of {arguments.pause_ms:g} ms after each answer")
        if "producers" in arguments.figures:
            rates, waits = await producers(library, arguments)
            settings = (library.settings(True, arguments.concurrency, arguments.batch)
                        + f"; {arguments.producers} producer processes, {arguments.jobs // arguments.producers} "
                        "jobs each, enqueued one at a time")
            figure(f"producers-{arguments.producers}", "jobs/s", rates, settings + "; until the last job's function started")
            figure(f"producers-{arguments.producers}-latency", "ns", waits, settings + "; each job's enqueue until its function started")
        if "throughput" in arguments.figures:
            received, acked, sizes = await throughput(library, arguments)
            settings = (library.settings(True, arguments.concurrency, arguments.batch)
                        + f"; {min(sizes)}-{max(sizes)} jobs a sample (about {arguments.seconds:g} s at the rate "
                        f"of the sample before, at most {arguments.jobs}) enqueued in batches of {arguments.batch}")
            figure("throughput", "jobs/s", received, settings + "; until the last job's function started")
            figure("throughput-acked", "jobs/s", acked, settings + "; until the database shows every job finished")
        return figures
    finally:
        if library is not None:
            try:
                await library.close()
            except Exception:
                pass
        await admin.execute(f"DROP SCHEMA IF EXISTS {arguments.schema} CASCADE")
        await checkpoint(admin)
        await admin.close()


async def checkpoint(admin):
    """Writes the server's dirty pages out (CHECKPOINT, where the role may), so that neither what
    ran before (a throughput's tens of thousands of rows) slows this peer's commits, nor this
    peer's the figures measured after it. Without the right, it does nothing."""
    import psycopg

    try:
        await admin.execute("CHECKPOINT")
    except psycopg.Error:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", required=True, choices=LIBRARIES)
    parser.add_argument("--url", required=True, help="postgres://USER@HOST:PORT/DATABASE")
    parser.add_argument("--figures", default="latency,throughput", help="latency,throughput (default both)")
    parser.add_argument("--latency-samples", type=int, default=500, help="measured jobs (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="warm-up jobs before them (default 50)")
    parser.add_argument("--pause-ms", type=float, default=2, help="pause after each answer (default 2 ms)")
    parser.add_argument("--jobs", type=int, default=20000, help="most jobs per throughput sample (default 20000)")
    parser.add_argument("--seconds", type=float, default=5,
                        help="a throughput sample's length at the warm-up's rate, which sizes it (default 5 s)")
    parser.add_argument("--throughput-samples", type=int, default=3, help="throughput samples (default 3)")
    parser.add_argument("--batch", type=int, default=100,
                        help="enqueue batch, and PgQueuer's dequeue batch_size (default 100)")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="Procrastinate's worker concurrency for throughput (default 10)")
    parser.add_argument("--timeout", type=float, default=60, help="the longest wait for anything (default 60 s)")
    parser.add_argument("--schema", default=None, help="the schema to work in (default liaison_bench_LIBRARY_PID)")
    parser.add_argument("--producers", type=int, default=1, help="producer processes for --figures producers")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--producer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="latency", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    arguments.schema = arguments.schema or f"liaison_bench_{arguments.library}_{os.getpid()}"
    try:
        if arguments.worker:
            worker(arguments)
            return
        if arguments.producer:
            producer(arguments)
            return
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # runs the cleanup
        for figure in asyncio.run(produce(arguments)):
            print(json.dumps(figure), flush=True)
    except PeerError as error:
        print(f"{arguments.library} peer: {error}", file=sys.stderr)
        sys.exit(1)
    except ImportError as error:
        print(f"{arguments.library} peer: {error} in {sys.prefix}; run Benchmarks/postgres/make-venv.sh", file=sys.stderr)
        sys.exit(1)
    except Exception as error:
        print(f"{arguments.library} peer: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
