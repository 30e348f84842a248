"""Where the lake tables serving reads live: the gold table of each view, silver, and the
table of each derived pipeline; and whether a table changed (:func:`table_version`).

Gold and silver are written by the batch layer and read by serving's SQL
views (:mod:`serving.sql`, the SQL server's ``events``), so their places are
part of the shared layout, not of either side. Bronze, staging and the
ledger are the batch layer's own (:mod:`batch_layer.bronze`).

>>> from core.settings import LakeSettings, Settings
>>> from views import view
>>> gold_path(Settings(lake=LakeSettings(root="s3a://lake/prod/")), view("clicks"))
's3a://lake/prod/gold/clicks'
>>> silver_path(Settings(lake=LakeSettings(root="s3a://lake/prod")), "web.events.v1")
's3a://lake/prod/silver/web_events_v1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.settings import Settings
from pipelines.spec import topic_table_name
from views.spec import ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "derived_path",
    "gold_path",
    "silver_path",
    "table_version",
    "topic_table_name",
    "user_agents_path",
]


def gold_path(settings: Settings, spec: ViewSpec) -> str:
    """The Delta table of view ``spec``'s gold rows, partitioned by ``window_date``."""
    return f"{settings.lake.root.rstrip('/')}/gold/{spec.name}"


def derived_path(settings: Settings, name: str) -> str:
    """The table of the derived pipeline ``name`` (:class:`pipelines.DerivedSpec`)."""
    return f"{settings.lake.root.rstrip('/')}/derived/{name}"


def silver_path(settings: Settings, topic: str) -> str:
    """The silver Delta table of the events read from ``topic``."""
    return f"{settings.lake.root.rstrip('/')}/silver/{topic_table_name(topic)}"


def user_agents_path(settings: Settings) -> str:
    """The user-agent dimension the SQL server keeps (:mod:`serving.connect.user_agents`)."""
    return f"{settings.lake.root.rstrip('/')}/dims/user_agents"


def table_version(spark: SparkSession, path: str) -> tuple[int, int] | None:
    """The newest commit of the Delta table at ``path`` as (version, its file's modification
    time in ms), None when there is no table; from a listing of its ``_delta_log``, with no
    Spark job: a cheap "has it changed?" check (the time tells a table deleted and written
    again apart from the one it replaced)."""
    jvm = spark.sparkContext._jvm
    pattern = jvm.org.apache.hadoop.fs.Path(f"{path.rstrip('/')}/_delta_log/*.json")
    fs = pattern.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    commits = [
        (int(name[:-5]), status.getModificationTime())
        for status in fs.globStatus(pattern) or []
        if (name := status.getPath().getName())[:-5].isdigit()
    ]
    return max(commits) if commits else None
