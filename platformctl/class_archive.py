"""Make the local Spark driver's class archive: ``python -m platformctl.class_archive PATH``.

A Spark driver loads some twenty thousand classes from its jars, parsing and verifying
each, before its first query answers, and every driver on the machine does it again.
A dynamic CDS archive (JDK 13+) holds those classes ready to map: this runs a small
session through what the platform's drivers do (Delta writes, appends and reads, an
aggregation with a sketch, JSON parsing, a streaming query) with
``-XX:ArchiveClassesAtExit=PATH``, and the JVM writes the archive when it exits.
``core.spark.build_spark_session`` then starts local drivers with it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from core.settings import load_settings


def workload(spark, root: Path) -> None:
    """What the platform's drivers do, small: the classes they load."""
    from pyspark.sql import functions as F

    table = str(root / "table")
    rows = spark.range(2000).select(
        (F.col("id") % 7).alias("day"),
        F.concat(F.lit("visitor-"), (F.col("id") % 97).cast("string")).alias("visitor"),
        F.to_json(F.struct(F.col("id").alias("n"))).alias("payload"),
    )
    rows.write.format("delta").partitionBy("day").save(table)
    rows.limit(100).write.format("delta").mode("append").save(table)
    events = spark.read.format("delta").load(table)
    events.groupBy("day").agg(
        F.count("*"), F.approx_count_distinct("visitor"), F.hll_sketch_agg("visitor")
    ).collect()
    events.select(F.from_json("payload", "n BIGINT").alias("p")).where("p.n > 5").count()
    query = (
        spark.readStream.format("delta")
        .load(table)
        .groupBy("day")
        .count()
        .writeStream.outputMode("complete")
        .format("memory")
        .queryName("archive_stream")
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main(argv: list[str]) -> int:
    from core.spark import build_spark_session, spark_conf

    (archive,) = argv
    settings = load_settings()
    options = spark_conf(settings.spark, app_name="-").get("spark.driver.extraJavaOptions", "")
    dump = f"-Xlog:cds=off -XX:ArchiveClassesAtExit={archive}"
    spark = build_spark_session(
        settings,
        app_name="class-archive",
        extra={"spark.driver.extraJavaOptions": f"{options} {dump}".strip()},
    )
    with tempfile.TemporaryDirectory() as root:
        workload(spark, Path(root))
    spark.stop()
    return 0  # the JVM writes the archive as it exits, after this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
