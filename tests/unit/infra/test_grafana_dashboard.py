"""The Grafana dashboard reads only metrics the platform exports, with valid PromQL."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[3] / "infra/local/grafana/platform-dashboard.json"
EXPORTED = re.compile(r"\b(wap_[a-z_]+|collector_[a-z_]+|ALERTS)\b")


def _exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def test_every_panel_queries_the_platforms_metrics():
    exprs = _exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        assert EXPORTED.search(expr), expr


def test_every_query_is_valid_promql(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by `make install`"
    rules = {"groups": [{"name": "dashboard", "rules": []}]}
    for i, expr in enumerate(_exprs()):
        rules["groups"][0]["rules"].append({"record": f"dashboard:panel{i}", "expr": expr})
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    # promtool reads YAML, of which JSON is a subset.
    done = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "rules.json")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
