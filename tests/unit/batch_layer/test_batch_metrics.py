"""The step server's Prometheus metrics from finished step requests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from batch_layer.metrics import BatchMetrics


def _samples(metrics: BatchMetrics) -> dict[tuple, float]:
    return {
        (s.name, *sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name.startswith("wap_")
    }


def test_steps_durations_rows_and_findings_are_counted():
    metrics = BatchMetrics()
    summary = {
        "steps": {
            "bronze": {"seconds": 4.5, "result": {"records": 1200, "gap": False}},
            "silver": {"seconds": 9.0, "result": {"events": 1150, "rejects": 20, "dates": []}},
        }
    }
    metrics.observe("web_events", ["bronze", "--pipeline", "web_events"], "success", 0, summary)
    metrics.observe("web_events", ["check_silver"], "failed", 3, {"steps": {}})
    metrics.observe("web_events", ["reconcile"], "failed", 4, None)
    got = _samples(metrics)
    p = ("pipeline", "web_events")
    assert got[("wap_batch_requests_total", p, ("state", "success"), ("step", "bronze"))] == 1
    assert got[("wap_batch_requests_total", p, ("state", "failed"), ("step", "check_silver"))] == 1
    assert got[("wap_batch_gate_failures_total", p)] == 1
    assert got[("wap_batch_drift_total", p)] == 1
    assert got[("wap_batch_step_duration_seconds", p, ("step", "silver"))] == 9.0
    assert got[("wap_batch_step_rows", ("kind", "records"), p, ("step", "bronze"))] == 1200
    assert got[("wap_batch_step_rows", ("kind", "rejects"), p, ("step", "silver"))] == 20
    assert not [k for k in got if ("kind", "gap") in k]  # booleans are not row counts


def test_a_step_job_pushes_its_metrics_to_the_pushgateway():
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from batch_layer.metrics import push

    received: list[tuple[str, bytes]] = []

    class Gateway(BaseHTTPRequestHandler):
        def do_PUT(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_):
            pass

    server = HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.handle_request, daemon=True).start()
    summary = {"steps": {"gold": {"seconds": 3.0, "result": {"rows": 40}}}}
    push(f"http://127.0.0.1:{server.server_port}", "web_events", ["gold"], "success", 0, summary)
    server.server_close()
    ((path, body),) = received
    assert path == "/metrics/job/wap_batch/pipeline/web_events/step/gold"
    text = body.decode()
    assert 'wap_batch_step_rows{kind="rows",pipeline="web_events",step="gold"} 40.0' in text
    assert 'wap_batch_requests_total{pipeline="web_events",state="success",step="gold"} 1.0' in text


def test_an_absent_pushgateway_is_not_the_steps_failure(caplog):
    from batch_layer.metrics import push

    with caplog.at_level("WARNING"):
        push("http://127.0.0.1:9", "web_events", ["gold"], "success", 0, None)  # nothing listens
    assert [r for r in caplog.records if "batch.metrics_not_pushed" in r.getMessage()]
