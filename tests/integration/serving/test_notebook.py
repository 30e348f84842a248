"""The analysts' notebook (``docs/notebooks/analyst.ipynb``) runs headless against the platform.

``notebook_runner.py``, in the analyst's virtualenv, executes every cell with nbclient and
ipykernel against the session's SQL server (over the published lake: two days of simulated
traffic through the real batch pipeline), with the token, for the week of that traffic.
No cell may fail; its tables must equal the ground truth of the sent events, and its plot
must be drawn.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from ingest.simulator import build_truth
from serving.connect.examples import NOTEBOOK
from tests.support import sql_truth as truth
from tests.support.lake import GROUP
from tests.support.sql import SQL_TOKEN

# One worker builds the session's published lake once for every module reading it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

RUNNER = Path(__file__).with_name("notebook_runner.py")
WEEK_OF = "2024-03-05"
"""A day of the published lake's week (its traffic starts on Monday 2024-03-04)."""
FRAMES = ["top_pages", "campaigns", "funnel", "hourly"]


def _execute(python: Path, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The runner on the notebook; the executed notebook is written to ``executed.ipynb``."""
    job = {
        "notebook": str(NOTEBOOK),
        "executed": str(folder / "executed.ipynb"),
        "cwd": str(folder),
        "cell_timeout_s": 600,
        "frames": FRAMES,
    }
    (folder / "job.json").write_text(json.dumps(job))
    home = folder / "home"
    home.mkdir()
    return subprocess.run(
        [python, RUNNER, folder / "job.json"],
        capture_output=True,
        text=True,
        timeout=1200,
        env={"PATH": os.environ["PATH"], "HOME": str(home), **env},
    )


def _env(settings, token: str) -> dict[str, str]:
    """The notebook's parameters: the local SQL server, a token, the lake's week."""
    return {
        "SQL_SERVER": f"sc://localhost:{settings.sql.port}",
        "WAP_SQL__TOKEN": token,
        "WEEK_OF": WEEK_OF,
    }


@pytest.fixture(scope="module")
def notebook(sql_server, client_python: Path, tmp_path_factory) -> tuple[dict, dict]:
    """(the frames the notebook built, the executed notebook)."""
    folder = tmp_path_factory.mktemp("notebook")
    done = _execute(client_python, folder, _env(sql_server.settings, SQL_TOKEN))
    assert done.returncode == 0, done.stderr[-6000:]
    frames = json.loads(done.stdout.strip().splitlines()[-1])
    return frames, json.loads((folder / "executed.ipynb").read_text())


def _rows(frame: dict) -> list[list]:
    return frame["data"]


def _column(frame: dict, name: str) -> list:
    index = frame["columns"].index(name)
    return [row[index] for row in frame["data"]]


def test_every_cell_runs_and_the_plot_is_drawn(notebook):
    _, executed = notebook
    code = [cell for cell in executed["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell.get("execution_count") for cell in code)
    outputs = [output for cell in code for output in cell["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot was drawn"


def test_the_notebook_answers_equal_the_ground_truth(notebook, published_lake):
    frames, _ = notebook
    events, valid = published_lake.events, published_lake.valid

    top = _rows(frames["top_pages"])
    assert [row[:2] for row in top] == truth.top_pages(events)
    assert all(visitors > 0 for _, _, visitors in top)

    assert _rows(frames["campaigns"]) == truth.visitors_by_campaign(valid)

    ((viewed, searched, conversion),) = _rows(frames["funnel"])
    assert [[viewed, searched]] == truth.funnel(valid)
    assert abs(conversion - searched / viewed) <= 0.0005 and 0 < conversion < 1


def test_events_per_hour_from_the_batch_layer_equal_the_ground_truth(notebook, published_lake):
    frames, _ = notebook
    hourly = frames["hourly"]
    expected = Counter()
    for minute, count in build_truth(published_lake.events).events_per_minute.items():
        expected[minute[:13]] += count  # 2024-03-04T06
    hours = [hour[:13] for hour in _column(hourly, "hour")]
    batch = dict(zip(hours, _column(hourly, "batch"), strict=True))
    assert {hour: n for hour, n in batch.items() if n} == dict(expected)
    assert sum(expected.values()) == len(published_lake.valid)
    assert all(n >= 0 for n in _column(hourly, "speed"))


def test_a_wrong_token_stops_the_notebook_at_its_first_query(sql_server, client_python, tmp_path):
    done = _execute(client_python, tmp_path, _env(sql_server.settings, "not-the-token"))
    assert done.returncode != 0
    assert "UNAUTHENTICATED" in done.stderr, done.stderr[-3000:]
    executed = json.loads((tmp_path / "executed.ipynb").read_text())
    failed = [
        "".join(cell["source"])
        for cell in executed["cells"]
        if any(o["output_type"] == "error" for o in cell.get("outputs", []))
    ]
    assert len(failed) == 1 and "serving_boundaries" in failed[0]
