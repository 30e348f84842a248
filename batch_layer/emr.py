"""A batch step as an EMR Serverless job run: the job driver the DAGs' operator sends.

Pure data, no AWS or Airflow import: ``dags/pipeline_factory.py`` builds its
``EmrServerlessStartJobOperator`` from :func:`job_driver` when
``WAP_BATCH__RUNNER=emr_serverless``. The job runs ``batch_entry.py`` (the
same ``python -m batch_layer STEP ...``) from the artifact that
``python -m platformctl package`` builds and the operator uploads to
``batch.artifacts_uri``:

- ``batch_entry.py``: the entry point;
- ``pyenv.tar.gz``: the Python environment (the project's wheel and its
  dependencies, built on the EMR release's OS), unpacked as ``environment``;
- ``jars/``: the connector jars (Delta, Kafka, OpenLineage).

The job reads its ``WAP_*`` settings from its environment like every entry
point; on EMR Serverless they belong in the application's runtime
configuration (``spark.emr-serverless.driverEnv.WAP_*`` properties), not in
the DAG: no setting, and no secret, passes through a task's parameters.

>>> from core.settings import BatchSettings, Settings, SparkSettings
>>> s = Settings(
...     batch=BatchSettings(runner="emr_serverless", emr_application_id="app-1",
...                         emr_job_role_arn="arn:aws:iam::1:role/job",
...                         artifacts_uri="s3://lake/artifacts/0.1.0/"),
...     spark=SparkSettings(jars=("delta-spark_4.1_2.13-4.4.0.jar",)))
>>> driver = job_driver(s, ["bronze", "--pipeline", "web_events"])["sparkSubmit"]
>>> driver["entryPoint"], driver["entryPointArguments"][0]
('s3://lake/artifacts/0.1.0/batch_entry.py', 'bronze')
>>> driver["sparkSubmitParameters"].split()[:2]
['--jars', 's3://lake/artifacts/0.1.0/jars/delta-spark_4.1_2.13-4.4.0.jar']
"""

from __future__ import annotations

from core.emr import PYENV, artifact_params, artifacts_root
from core.settings import Settings

__all__ = ["ENTRY_POINT", "PYENV", "job_driver", "monitoring"]

ENTRY_POINT = "batch_entry.py"


def job_driver(settings: Settings, args: list[str]) -> dict:
    """``jobDriver`` of ``StartJobRun``: the entry point, its arguments, jars, environment."""
    root = artifacts_root(settings)
    params = [
        *artifact_params(settings),
        f"--conf spark.sql.shuffle.partitions={settings.spark.shuffle_partitions}",
    ]
    return {
        "sparkSubmit": {
            "entryPoint": f"{root}/{ENTRY_POINT}",
            "entryPointArguments": list(args),
            "sparkSubmitParameters": " ".join(params),
        }
    }


def monitoring(settings: Settings) -> dict:
    """``configurationOverrides``: the job's driver and executor logs beside the artifact."""
    return {
        "monitoringConfiguration": {
            "s3MonitoringConfiguration": {"logUri": f"{artifacts_root(settings)}/logs/"}
        }
    }
