"""The Airflow DAGs of every batch pipeline declared in ``batch_layer/pipelines.py``.

Adding a pipeline needs no change here: declare its spec there and its
ingest, views, backfill and maintenance DAGs appear (docs/adding-a-pipeline.md).
Keep the words "Airflow" and "DAG" in this file: Airflow's DAG discovery
(safe mode, on by default) skips files that do not mention both.
"""

from __future__ import annotations

from batch_layer.dag_factory import pipeline_dags
from batch_layer.pipelines import PIPELINES
from core.settings import load_settings

_settings = load_settings()
for _spec in PIPELINES:
    globals().update(pipeline_dags(_spec, _settings))
