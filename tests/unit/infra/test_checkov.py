"""checkov runs clean on infra/terraform and on the image's Dockerfile; every skip says why,
next to what it skips."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

CHECKOV_VENV = ".platform/checkov-venv"


def _scan(checkov: Path, cwd: Path, *args: str) -> list[dict]:
    """checkov's reports of ``cwd``, after asserting each is clean (skips with reasons)."""
    assert checkov.exists(), f"{checkov} is missing: run `make install` (it builds checkov's venv)."
    result = subprocess.run(
        [str(checkov), "-d", ".", "-o", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    for report in reports:
        failed = [
            (check["check_id"], check["resource"]) for check in report["results"]["failed_checks"]
        ]
        assert failed == [], failed
        assert report["summary"]["parsing_errors"] == 0
        for check in report["results"]["skipped_checks"]:
            reason = check["check_result"].get("suppress_comment", "")
            assert len(reason.split()) >= 6, f"{check['check_id']} skipped without a reason"
    assert result.returncode == 0, result.stderr[-2000:]
    return reports


# A full scan of both environments takes about 15 s.
@pytest.mark.slow
def test_checkov_passes_with_justified_skips_only(terraform_root):
    checkov = terraform_root.parents[1] / CHECKOV_VENV / "bin" / "checkov"
    reports = _scan(checkov, terraform_root, "--config-file", ".checkov.yaml")
    assert {report["check_type"] for report in reports} >= {"terraform"}
    for report in reports:
        assert report["summary"]["passed"] > 100


def test_checkov_passes_on_the_image_recipe(terraform_root):
    checkov = terraform_root.parents[1] / CHECKOV_VENV / "bin" / "checkov"
    image = terraform_root.parent / "image"
    (report,) = _scan(checkov, image, "--framework", "dockerfile")
    assert report["check_type"] == "dockerfile"
    assert report["summary"]["resource_count"] == 1  # the Dockerfile, recognised by its name
    # The checks that matter for a service image ran and passed: a HEALTHCHECK, a USER
    # that is not root, a base with a version, an absolute WORKDIR.
    passed = {check["check_id"] for check in report["results"]["passed_checks"]}
    assert {
        "CKV_DOCKER_2",
        "CKV_DOCKER_3",
        "CKV_DOCKER_7",
        "CKV_DOCKER_8",
        "CKV_DOCKER_10",
    } <= passed
