"""An analyst's statements that take the cores, and two other analysts who measure meanwhile:
run by the SQL server's cores tests in the analyst's virtualenv (``pyspark-client`` from
PyPI, nothing of this repository).

It imports nothing from this repository. Reads a JSON job (argv[1]): the Spark
Connect URL, the ``statement`` to run (a name of :data:`HOGS`, or none: only
measure), ``measure_s`` (how long to measure when there is no statement) and
``after_s`` (how long to go on measuring after the statement ended: a task that
ignored its cancellation ends its executor some seconds later). Prints one JSON
document (its last line of output):

- ``hog``: the statement's ``error`` (the first line of what the server answered,
  null when it answered) and ``seconds``;
- ``select1`` and ``small``: per ``SELECT 1`` (every 0.5 s) and per small aggregate
  (``range(0, 1_000_000, 1, 4).count()``, every second), each from a session of its
  own, its ``at`` (seconds since the statement started), ``seconds`` and ``error``.
"""

import json
import sys
import threading
import time

from pyspark.sql import SparkSession

HOGS = {
    # Backtracking the regex engine does without looking at interrupts: days per row (three
    # .* share 100,000 characters before a '!' that is not there, about 1e14 steps; patterns
    # of exponential time, '(.*a){12}$', are refused before they run).
    "regex": "SELECT count(*) FROM range(0, 2, 1, 2) WHERE regexp_like("
    "concat(repeat('a', 100000), cast(id AS STRING)), '.*.*.*!')",
    # 4e10 pairs compared: tens of seconds of every core.
    "cross_join": "SELECT count(*) FROM range(200000) a CROSS JOIN range(200000) b "
    "WHERE a.id + b.id = -1",
    # One value of 900 MB.
    "huge_value": "SELECT length(repeat('x', 900000000))",
    # Most of an hour of work for two cores in the most tasks allowed: ended by the time limit.
    "time_limit": "SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(0, 4000000000, 1, 8)",
}


def first_line(error):
    """What the server answered: a gRPC error's details, else the exception's first line."""
    details = getattr(error, "details", None)
    text = details() if callable(details) else str(error)
    return (str(text).strip().splitlines() or [""])[0][:500]


def timed(run):
    began = time.monotonic()
    try:
        run()
        error = None
    except Exception as failed:  # reported, and asserted on by the test
        error = first_line(failed)
    return {"seconds": round(time.monotonic() - began, 3), "error": error}


def measure(session, run, every_s, started, done, out):
    """``run`` on ``session`` every ``every_s`` until ``done``: each one's time and error."""
    while not done.is_set():
        at = time.monotonic() - started
        out.append({"at": round(at, 1), **timed(lambda: run(session))})
        done.wait(max(0.0, every_s - (time.monotonic() - started - at)))


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    url = job["url"]
    hog, probe, small = (SparkSession.builder.remote(url).create() for _ in range(3))
    probe.sql("SELECT 1").collect()
    small.range(0, 1_000_000, 1, 4).count()  # warm: each session's first job plans more
    out = {"hog": None, "select1": [], "small": []}
    done = threading.Event()
    started = time.monotonic()
    measures = [
        threading.Thread(
            target=measure,
            args=(probe, lambda s: s.sql("SELECT 1").collect(), 0.5, started, done, out["select1"]),
        ),
        threading.Thread(
            target=measure,
            args=(
                small,
                lambda s: s.range(0, 1_000_000, 1, 4).count(),
                1.0,
                started,
                done,
                out["small"],
            ),
        ),
    ]
    for thread in measures:
        thread.start()
    if job.get("statement"):
        out["hog"] = timed(lambda: hog.sql(HOGS[job["statement"]]).collect())
        done.wait(job.get("after_s", 0))
    else:
        done.wait(job["measure_s"])
    done.set()
    for thread in measures:
        thread.join()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
