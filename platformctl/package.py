"""``python -m platformctl package``: the artifact the Spark jobs run from on a cluster.

One folder, uploaded as is to ``batch.artifacts_uri`` (``s3://<lake>/artifacts/<version>``)
for ``WAP_BATCH__RUNNER=emr_serverless`` (:mod:`batch_layer.emr`) and for the streaming
speed job that ``platformctl speed-deploy`` keeps running (:mod:`speed_layer.emr`):

- ``batch_entry.py``: the batch steps' entry point (``python -m batch_layer`` with its
  arguments);
- ``speed_entry.py``: the speed job's (``python -m speed_layer``);
- ``web_activity_platform-<version>-py3-none-any.whl``: the project, built from this tree;
- ``requirements.txt``: its runtime dependencies, pinned as ``requirements/main.lock``
  pins them (pyspark left out: the cluster's Spark provides it; boto3 in, for the secrets);
- ``jars/``: the connector jars of ``.platform/jars/spark`` (Delta, Kafka, OpenLineage);
- ``manifest.json``: the version, the git commit, and each file's size and sha256.

``--pyenv`` also packs ``pyenv.tar.gz`` (the wheel and the requirements in a
virtualenv, with ``venv-pack``), which must be built on the cluster's OS and
Python (Amazon Linux 2023 and Python 3.11 for EMR 7.x): run it there, e.g. in
the EMR release's container image.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import PROJECT_ROOT, Settings
from core.spark import local_spark_jars

__all__ = ["ENTRIES", "build_artifact", "build_wheel", "runtime_requirements"]

_log = get_logger(__name__)
_ENTRY = '''"""{summary}"""

import os
import sys

from core.secrets import export_secrets

export_secrets(os.environ)  # WAP_SECRETS: the secret settings, from Secrets Manager
if "PYSPARK_GATEWAY_PORT" in os.environ:
    # Started by spark-submit: the session runs on the master it was given (the cluster's),
    # not on the settings' local default.
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    os.environ.setdefault("WAP_SPARK__MASTER", SparkConf().get("spark.master", "local[2]"))

from {module} import main  # noqa: E402 - after the secrets are in the environment

sys.exit(main(sys.argv[1:]))
'''
ENTRIES = {
    "batch_entry.py": _ENTRY.format(
        summary="The batch steps on a cluster: ``batch_entry.py STEP --pipeline P ...``.",
        module="batch_layer.cli",
    ),
    "speed_entry.py": _ENTRY.format(
        summary="The streaming speed layer on a cluster: ``speed_entry.py [--pipeline P]``.",
        module="speed_layer.cli",
    ),
}
"""The entry points of the artifact, one per layer that runs on a cluster: each exports the
secret settings and runs the layer's command line with the job's arguments."""
_CLUSTER_PROVIDED = {"pyspark", "py4j"}


def runtime_requirements(lock: Path = PROJECT_ROOT / "requirements" / "main.lock") -> list[str]:
    """The pins of ``main.lock`` that the jobs need at run time (not the cluster's Spark, not
    the development tools)."""
    dev = {"pytest", "pytest-timeout", "ruff", "hypothesis", "segment-analytics-python"}
    dev |= {"rudder-sdk-python", "python-hcl2", "selenium"}
    pins = []
    for line in lock.read_text().splitlines():
        if not line or line.startswith((" ", "#")) or "==" not in line:
            continue
        name = line.split("==", 1)[0].split("[", 1)[0].strip().lower()
        if name not in _CLUSTER_PROVIDED and name not in dev:
            pins.append(line.strip())
    return pins


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _commit() -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or None


def build_wheel(out: Path) -> Path:
    """The project's wheel, built from this tree into ``out``; its path."""
    uv = Path(sys.executable).with_name("uv")
    with tempfile.TemporaryDirectory() as built:
        subprocess.run(
            [str(uv), "build", "--wheel", "--quiet", "--out-dir", built, str(PROJECT_ROOT)],
            check=True,
            capture_output=True,
            text=True,
        )
        (wheel,) = Path(built).glob("*.whl")
        out.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(wheel, out / wheel.name))


def build_artifact(settings: Settings, out: Path, *, pyenv: bool = False) -> dict:
    """Write the artifact into ``out`` (replaced); return its manifest."""
    if out.exists():
        shutil.rmtree(out)
    (out / "jars").mkdir(parents=True)
    wheel = build_wheel(out)
    for name, text in ENTRIES.items():
        (out / name).write_text(text)
    pins = runtime_requirements()
    (out / "requirements.txt").write_text("\n".join(pins) + "\n")
    for jar in settings.spark.jars or local_spark_jars(settings.local.state_dir):
        shutil.copy(jar, out / "jars" / Path(jar).name)
    if pyenv:
        _pack_pyenv(out, out / wheel.name)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    manifest = {
        "version": wheel.name.split("-")[1],
        "commit": _commit(),
        "files": {
            str(p.relative_to(out)): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
            for p in files
        },
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log_event(_log, "package.built", out=str(out), files=len(files))
    return manifest


def _pack_pyenv(out: Path, wheel: Path) -> None:
    """``pyenv.tar.gz``: a virtualenv with the requirements and the wheel, by venv-pack."""
    uv = Path(sys.executable).with_name("uv")
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "pyenv"
        subprocess.run([str(uv), "venv", "-q", "--seed", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        requirements = str(out / "requirements.txt")
        for args in (["-r", requirements], ["--no-deps", str(wheel)], ["venv-pack==0.2.0"]):
            subprocess.run([str(uv), "pip", "install", "-q", "--python", python, *args], check=True)
        subprocess.run(
            [python, "-m", "venv_pack", "-p", str(venv), "-o", str(out / "pyenv.tar.gz")],
            check=True,
        )
