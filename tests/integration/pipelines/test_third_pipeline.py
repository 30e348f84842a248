"""A third pipeline is a test: the unit tier passes unchanged with two more declared.

In a copy of the project, two throwaway pipelines are added the way
docs/adding-a-pipeline.md adds one, and nothing else is changed: ``app_events``, mobile
screens through the collector on a source of its own (``app``, with its own write key), and
the tutorial's ``signups``, written by a producer. The unit tier then runs there: a test that
hard-codes today's pipelines (their names, their number, their views) fails, as it would for
the engineer who adds the next one. No platform is needed: the unit tier starts none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.settings import PROJECT_ROOT
from tests.integration.pipelines.test_tutorial import tutorial_files

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

APP_EVENTS = '''"""Mobile app screens through the collector, on a source of its own (throwaway)."""

from pipelines.spec import Collector, PipelineSpec

PIPELINE = PipelineSpec(
    name="app_events",
    contract="app_events",
    contract_major=1,
    views=("app_screens",),
    topic="app.events.v1",
    arrival=Collector(sources=("app",)),
    owner="web-analytics",
    identity=("userId", "anonymousId"),
)
'''

WRITE_KEYS = {"local-website": "local-dev-write-key", "app": "app-events-write-key"}


def _copy_project(target: Path) -> Path:
    """The tracked files (the tests included), then the two pipelines' files."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (PROJECT_ROOT / name).is_file() and not name.startswith(".platform"):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, target / name)
    added = dict(tutorial_files())
    added.pop("newsletter_service.py")  # the producer's service: not part of the project
    added["pipelines/declared/app_events.py"] = APP_EVENTS
    site = (PROJECT_ROOT / "views" / "site_activity.py").read_text()
    added["views/app_screens.py"] = site.replace('name="site_activity"', 'name="app_screens"')
    for name, text in added.items():
        assert not (target / name).exists(), f"{name} would replace a file"
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
    # The jars, the JDK's class archive and the tools `make install` put there, read only.
    (target / ".platform").symlink_to(PROJECT_ROOT / ".platform", target_is_directory=True)
    contract = target / "data_contracts" / "app_events"
    shutil.copytree(PROJECT_ROOT / "data_contracts" / "web_events", contract)
    for path in contract.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for old, new in (("web.events.v1", "app.events.v1"), ("web-events", "app-events")):
                text = text.replace(old, new)
            path.write_text(text)
    return target


def test_the_unit_tier_passes_with_a_third_collector_and_a_third_producer_pipeline(tmp_path):
    project = _copy_project(tmp_path / "project")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WAP_", "PYTEST_", "PYTHONPATH"))
    }
    env |= {"PYTHONPATH": str(project), "WAP_COLLECTOR__WRITE_KEYS": json.dumps(WRITE_KEYS)}
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipelines import PIPELINES; print([p.name for p in PIPELINES])",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.strip() == "['app_events', 'checkouts', 'signups', 'web_events']"
    # As the doc says: the production topics and tables regenerated; then the engineer's
    # checkout holds the change as a commit.
    for step in (
        [sys.executable, "-m", "infra.terraform.generate"],
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        [
            "git",
            "-c",
            "user.name=engineer",
            "-c",
            "user.email=e@example.com",
            "commit",
            "-qm",
            "add",
        ],
    ):
        subprocess.run(step, cwd=project, env=env, capture_output=True, check=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-m", "not integration"],  # make unit
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )  # fmt: skip
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    # The failed tests' names, then their tracebacks as pytest printed them.
    tracebacks = done.stdout.partition(" FAILURES ")[2][:8000] or done.stdout[-6000:]
    assert done.returncode == 0, "\n".join([*failed, tracebacks, done.stderr[-2000:]])
