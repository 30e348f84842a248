"""The collector's metrics: one process's own, or every worker's summed (multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

from core.settings import PROJECT_ROOT
from ingest.metrics import CollectorMetrics


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_one_process_answers_with_its_own_figures() -> None:
    metrics = CollectorMetrics()
    metrics.observe(7, {"size": 3, "lag": None, "loaded": False})
    metrics.worker_requests.inc()
    figures = metrics.figures()
    assert figures.queue_depth == 7
    assert (figures.suppressions_size, figures.suppressions_lag) == (3, None)
    assert not figures.suppressions_loaded
    samples = _samples(metrics.render().decode())
    assert samples[("collector_suppressions_lag", ())] == -1
    assert samples[("collector_worker_requests", ())] == 1
    assert ("process_cpu_seconds_total", ()) in samples


_WORKER = """
import sys
from ingest.metrics import CollectorMetrics
queue, size, lag, loaded = (int(a) for a in sys.argv[1:])
m = CollectorMetrics()
m.observe(queue, {"size": size, "lag": lag, "loaded": bool(loaded)})
m.worker_requests.inc(queue)
m.accepted.labels("web_events").inc(10)
m.produce_latency.observe(0.004)
f = m.figures()
print(f.queue_depth, f.suppressions_size, f.suppressions_lag, f.suppressions_loaded)
print(m.render().decode())
"""


def test_workers_figures_are_summed_by_whichever_worker_answers(tmp_path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    outputs = [
        subprocess.run(
            [sys.executable, "-c", _WORKER, *args],
            env=env,
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for args in (("3", "5", "0", "1"), ("4", "4", "2", "0"))
    ]
    figures, text = outputs[-1].split("\n", 1)
    # Two workers; queues summed; the smaller list, the larger lag; not loaded everywhere.
    assert figures.split() == ["7", "4", "2", "False"]
    samples = _samples(text)
    assert samples[("collector_events_accepted_total", (("pipeline", "web_events"),))] == 20
    assert samples[("collector_produce_latency_seconds_count", ())] == 2
    assert samples[("collector_producer_queue_depth", ())] == 7
    per_worker = sorted(v for (n, _), v in samples.items() if n == "collector_worker_requests")
    assert per_worker == [3, 4]
    assert not any(name.startswith("process_") for name, _ in samples)
