"""The Airflow DAGs of every pipeline declared in ``pipelines/declared/``.

Adding a pipeline needs no change here: declare its spec there and its
ingest, views, backfill, maintenance and forget DAGs appear (docs/adding-a-pipeline.md);
a derived pipeline's build and backfill DAGs likewise.
Keep the words "Airflow" and "DAG" in this file: Airflow's DAG discovery
(safe mode, on by default) skips files that do not mention both.

The DAGs come from ``pipeline_factory.py`` beside this file, imported as a
top-level module: Airflow puts the DAG folder (the bundle's path) on
``sys.path`` when it parses DAG files and when it runs their tasks (which is
why no file here is called ``pipelines.py``: it would hide the package). Parsing
imports no Spark code: the specs name their views, and the factory only
builds ``spark-submit`` tasks (a test checks ``pyspark`` stays unimported).
"""

from __future__ import annotations

from pipeline_factory import derived_dags, pipeline_dags

from core.settings import load_settings
from pipelines import DERIVED, PIPELINES

_settings = load_settings()
for _spec in PIPELINES:
    globals().update(pipeline_dags(_spec, _settings))
for _derived in DERIVED:
    globals().update(derived_dags(_derived, _settings))
