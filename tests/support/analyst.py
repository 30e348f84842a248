"""An analyst's script run as an analyst runs it: in the analyst's virtualenv, with a clean
environment (nothing of this repository on its path), a JSON job in and a JSON answer out."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["run_analyst_script"]


def run_analyst_script(
    python: Path, script: Path, job_file: Path, job: dict[str, Any], timeout_s: float = 900
) -> dict[str, Any]:
    """``script`` run by ``python`` on ``job`` (written to ``job_file``): the JSON document it
    prints last. A script that fails fails the test with its error lines (not the JVM's
    stack, which pyspark prints indented)."""
    job_file.write_text(json.dumps(job))
    done = subprocess.run(
        [python, script, job_file],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")},
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith(("\tat ", "  "))]
    assert done.returncode == 0, "\n".join(errors)[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
