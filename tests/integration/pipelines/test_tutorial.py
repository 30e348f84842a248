"""docs/adding-a-pipeline.md is a test: its files, as the page shows them, make a pipeline.

Every code block of the tutorial titled with a path (``title="views/signups_by_list.py"``)
is written to that path in a copy of the project, and nothing else is changed there. In that
copy, one process (``tutorial_driver.py``) runs what the tutorial says: the events produced
by the tutorial's own service module, the speed layer's catch-up, a batch run, the serving
answer, the SQL server's views, forgetting a member. Each answer is compared with the
events' ground truth here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.settings import PROJECT_ROOT, LakeSettings, LocalSettings, Settings, child_env
from core.spark import local_spark_jars
from tests.support.collector import own_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOC = PROJECT_ROOT / "docs" / "adding-a-pipeline.md"
DRIVER = Path(__file__).with_name("tutorial_driver.py")
FILE_BLOCK = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```$', re.M | re.S)
FORGOTTEN = "member-3"


def tutorial_files() -> dict[str, str]:
    """Path -> text of every code block of the tutorial titled with a path."""
    return {path: text for path, text in FILE_BLOCK.findall(DOC.read_text())}


def test_the_tutorial_shows_a_contract_a_view_a_declaration_and_a_service():
    assert set(tutorial_files()) == {
        "data_contracts/signups/v1.odcs.yaml",
        "views/signups_by_list.py",
        "pipelines/declared/signups.py",
        "newsletter_service.py",
        # The pipeline over it: its contract, its transformation, its declaration.
        "data_contracts/list_members/v1.odcs.yaml",
        "derived/list_members.py",
        "pipelines/declared/list_members.py",
    }


def _copy_project(target: Path) -> Path:
    """The project's tracked files (tests aside) copied to ``target``, then the tutorial's."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if name.startswith(("tests/", "bench/")) or not (PROJECT_ROOT / name).is_file():
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, target / name)
    for name, text in tutorial_files().items():
        assert not (target / name).exists(), f"the tutorial's {name} would replace a file"
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
    return target


def _events(now: datetime) -> list[list[str]]:
    """Forty events on two lists, ten members, two cancellations, 32 to 21 minutes old: every
    window is older than the batch layer's lateness (5 minutes), so a batch run takes them
    all, and younger than the speed layer's TTL."""
    events = []
    for n in range(40):
        kind = "unsubscribed" if n in (7, 23) else "subscribed"
        at = now - timedelta(minutes=32) + timedelta(seconds=17 * n)
        events.append(
            [f"e-{n}", kind, ("weekly", "deals")[n % 2], f"member-{n % 10}", at.isoformat()]
        )
    return events


def _minute(at: str) -> str:
    return datetime.fromisoformat(at).strftime("%Y-%m-%dT%H:%M:00Z")


def _members(events: list[list[str]], forgotten: str = "") -> dict[str, list[int]]:
    """Per ``day/list``: the distinct members who subscribed, and who cancelled."""
    found: dict[str, list[set[str]]] = {}
    for _, kind, name, member, at in events:
        if member != forgotten:
            cell = found.setdefault(f"{datetime.fromisoformat(at).date()}/{name}", [set(), set()])
            cell[kind == "unsubscribed"].add(member)
    return {key: [len(s) for s in sets] for key, sets in found.items()}


def test_the_tutorial_s_pipeline_is_live_final_served_queried_and_forgettable(
    local_platform: Settings, kafka_admin, cassandra_keyspace: str, unique_name: str, tmp_path
):
    project = _copy_project(tmp_path / "project")
    prefix = unique_name.replace("_", "-")
    topic = f"{prefix}.signups.v1"
    kafka = own_topics(local_platform.kafka, prefix)  # its own suppressions: forget writes there
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            ),
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "local": LocalSettings(state_dir=tmp_path / "state"),
            "spark": local_platform.spark.model_copy(
                update={"jars": local_spark_jars(local_platform.local.state_dir)}
            ),
            "batch": local_platform.batch.model_copy(update={"reports_dir": tmp_path / "quality"}),
        }
    )
    events = _events(datetime.now(UTC).replace(microsecond=0))
    (tmp_path / "events.json").write_text(json.dumps(events))
    env = child_env(settings) | {
        "PYTHONPATH": str(project),
        "WAP_KAFKA__TOPICS": json.dumps({"signups": topic}),
        "WAP_SPEED__PIPELINES": json.dumps(["signups"]),
    }
    try:
        done = subprocess.run(
            [sys.executable, DRIVER, tmp_path / "events.json", FORGOTTEN],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        kafka_admin.delete_topics(
            [topic, kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic]
        )
    assert done.returncode == 0, done.stderr[-6000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    subscribed = [e for e in events if e[1] == "subscribed"]
    truth = {
        name: dict(Counter(_minute(e[4]) for e in subscribed if e[2] == name))
        for name in ("deals", "weekly")
    }
    assert "signups" in out["pipelines"]
    assert out["drained"] == 0
    assert out["live"] == truth, "the speed layer's answer"
    assert out["batch_exit"] == 0
    assert out["merged"] == truth, "the merged answer after the batch run"
    assert out["gold_signups"] == len(subscribed)

    assert "member_id" not in out["sql_columns"] and "list" in out["sql_columns"]
    assert out["sql_events"] == len(events)
    assert out["sql_merged"] == {name: sum(m.values()) for name, m in truth.items()}

    assert out["derived_exit"] == 0
    assert out["derived_rows"] == _members(events), "the pipeline over it, built and gated"
    assert "list" in out["sql_derived_columns"]
    assert out["sql_derived_subscribed"] == sum(s for s, _ in _members(events).values())
    assert out["derived_rows_after_forget"] == _members(events, FORGOTTEN)

    forgotten = [e for e in subscribed if e[3] == FORGOTTEN]
    assert forgotten and out["forget_exit"] == 0
    assert out["silver_rows_of_forgotten"] == 0
    assert out["silver_rows"] == len(events) - len([e for e in events if e[3] == FORGOTTEN])
    assert out["gold_signups_after_forget"] == len(subscribed) - len(forgotten)
