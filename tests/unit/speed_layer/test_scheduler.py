"""The speed job's scheduler: a FAIR pool per streamed pipeline, or Spark's FIFO."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from core.settings import Settings, SpeedSettings
from speed_layer.cli import scheduler_conf


def test_fair_gives_each_streamed_pipeline_a_pool_of_its_own():
    speed = SpeedSettings(scheduler="FAIR", pipelines=["web_events", "checkouts"])
    conf = scheduler_conf(Settings(speed=speed))
    assert conf["spark.scheduler.mode"] == "FAIR"
    allocations = ET.parse(conf["spark.scheduler.allocation.file"]).getroot()
    Path(conf["spark.scheduler.allocation.file"]).unlink()
    pools = {pool.get("name"): pool for pool in allocations.iter("pool")}
    assert set(pools) == {"web_events", "checkouts"}
    for pool in pools.values():
        assert pool.findtext("schedulingMode") == "FIFO"  # a pipeline's batches in order
        assert pool.findtext("weight") == "1"


def test_fifo_is_spark_s_default_without_pools():
    conf = scheduler_conf(Settings(speed=SpeedSettings()))
    assert conf == {"spark.scheduler.mode": "FIFO"}
