"""What every EMR Serverless job run of the platform shares: the artifact it runs from.

Pure data, no AWS import. The batch steps (:mod:`batch_layer.emr`) and the
streaming speed job (:mod:`speed_layer.emr`) run from the same folder that
``python -m platformctl package`` builds and an operator uploads to
``batch.artifacts_uri``: an entry point per layer, ``pyenv.tar.gz`` (the
Python environment, unpacked as ``environment``) and ``jars/``. Kept here so
that the two layers build the same ``spark-submit`` parameters without
importing each other.

>>> from core.settings import BatchSettings, Settings, SparkSettings
>>> s = Settings(batch=BatchSettings(artifacts_uri="s3://lake/artifacts/0.1.0/"),
...              spark=SparkSettings(jars=("s3://lake/artifacts/jars/delta-spark.jar",)))
>>> artifacts_root(s)
's3://lake/artifacts/0.1.0'
>>> artifact_params(s)[0]
'--jars s3://lake/artifacts/0.1.0/jars/delta-spark.jar'
>>> artifact_params(s)[1]
'--conf spark.archives=s3://lake/artifacts/0.1.0/pyenv.tar.gz#environment'
"""

from __future__ import annotations

from pathlib import PurePosixPath

from core.settings import Settings

__all__ = ["PYENV", "artifact_params", "artifacts_root"]

PYENV = "pyenv.tar.gz"
_PYTHON = "./environment/bin/python"


def artifacts_root(settings: Settings) -> str:
    """``batch.artifacts_uri`` without its trailing slash; ValueError when it is not set."""
    if not settings.batch.artifacts_uri:
        raise ValueError(
            "batch.artifacts_uri is not set (WAP_BATCH__ARTIFACTS_URI): upload the output of "
            "`python -m platformctl package --pyenv` and name its folder, e.g. "
            "s3://<lake bucket>/artifacts/<version>."
        )
    return settings.batch.artifacts_uri.rstrip("/")


def artifact_params(settings: Settings) -> list[str]:
    """``spark-submit`` parameters that run a job from the artifact: its jars (the file names
    of ``spark.jars`` under ``jars/``) and its Python environment on the driver and every
    executor."""
    root = artifacts_root(settings)
    jars = [f"{root}/jars/{PurePosixPath(jar).name}" for jar in settings.spark.jars or ()]
    params = [
        f"--conf spark.archives={root}/{PYENV}#environment",
        f"--conf spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON={_PYTHON}",
        f"--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON={_PYTHON}",
        f"--conf spark.executorEnv.PYSPARK_PYTHON={_PYTHON}",
    ]
    if jars:
        params.insert(0, f"--jars {','.join(jars)}")
    return params
