"""The artifact the batch steps and the speed job run from on EMR Serverless
(``platformctl package``)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile

import pytest

from core.settings import Settings, SparkSettings
from platformctl.package import build_artifact, runtime_requirements

pytestmark = pytest.mark.slow  # builds a wheel


def test_the_artifact_holds_the_entry_point_the_wheel_the_pins_and_the_jars(tmp_path):
    jars = []
    for name in ("delta-spark_4.1_2.13-4.4.0.jar", "openlineage-spark_2.13-1.53.0.jar"):
        (tmp_path / name).write_bytes(b"PK\x03\x04 " + name.encode())
        jars.append(str(tmp_path / name))
    settings = Settings(spark=SparkSettings(jars=tuple(jars)))
    out = tmp_path / "artifact"
    manifest = build_artifact(settings, out)

    (wheel,) = out.glob("web_activity_platform-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("batch_layer/__main__.py", "speed_layer/__main__.py", "core/settings.py"):
        assert module in names, module
    assert any(n.startswith("views/") for n in names)
    assert any(n.startswith("data_contracts/web_events/") for n in names)
    assert not any(n.startswith("tests/") for n in names)

    pins = (out / "requirements.txt").read_text().split()
    assert any(p.startswith("delta-spark==") for p in pins)
    assert any(p.startswith("great-expectations==") for p in pins)
    assert not any(p.startswith(("pyspark==", "pytest==", "ruff==")) for p in pins)
    assert "boto3==1.44.8" in pins  # the entry points read their secrets with it
    assert pins == runtime_requirements()

    assert sorted(p.name for p in (out / "jars").iterdir()) == sorted(
        p.rsplit("/", 1)[-1] for p in jars
    )
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == manifest and manifest["version"] == wheel.name.split("-")[1]
    for name, entry in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == entry["sha256"]

    # Each entry point is its layer's CLI, run from the wheel (a zip on the path) alone.
    assert sorted(p.name for p in out.glob("*_entry.py")) == ["batch_entry.py", "speed_entry.py"]
    batch = _run_entry(tmp_path, wheel, out / "batch_entry.py")
    assert batch.returncode == 0 and "--pipeline" in batch.stdout, batch.stderr
    assert "--drain" not in batch.stdout
    speed = _run_entry(tmp_path, wheel, out / "speed_entry.py")
    assert speed.returncode == 0 and "--drain" in speed.stdout, speed.stderr


def _run_entry(cwd, wheel, entry) -> subprocess.CompletedProcess:
    """``entry --help`` in a fresh interpreter that imports the project from ``wheel`` only."""
    return subprocess.run(
        [sys.executable, "-S", "-c", "import site, runpy, sys; "
         f"sys.path[:0] = [{str(wheel)!r}]; site.main(); sys.argv = [{entry.name!r}, '--help']; "
         f"runpy.run_path({str(entry)!r}, run_name='__main__')"],
        capture_output=True, text=True, cwd=cwd,
    )  # fmt: skip
