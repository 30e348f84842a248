package platform.sql;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.execution.RDDScanExec;
import org.apache.spark.sql.execution.RangeExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Plans {@code range} as a scan of the rows Spark's own {@code RangeExec} makes without code
 * generation, so a cancelled statement's range tasks stop.
 *
 * <p>Spark's generated code for {@code range} looks at the task's kill flag only after a batch
 * of 1,000 rows has gone to its consumer within the same generated loop. When the consumer is
 * outside that loop (a sort-based aggregate such as {@code max} of a string, a window, a
 * shuffle: every node that takes rows one at a time), the loop returns after each row and never
 * reaches the check: {@code SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(0, 4e9, 1, 8)}
 * kept its 8 tasks running after the time limit cancelled it, until the task reaper ended every
 * executor they ran on, and no session had a slot until new executors had started. The rows
 * made without code generation come through Spark's {@code InterruptibleIterator}, which looks
 * at the flag before every row; the scan still takes part in code generation above it.
 *
 * <p>What it costs: a range's rows are made one by one instead of in a tight generated loop
 * (analysts use ranges for calendars and small series, where it does not show).
 */
final class InterruptibleRange extends SparkStrategy {

  @Override
  public Seq<SparkPlan> apply(LogicalPlan plan) {
    if (!(plan instanceof Range range)) {
      return CollectionConverters.asScala(java.util.List.<SparkPlan>of()).toList();
    }
    RangeExec exec = new RangeExec(range);
    RDD<InternalRow> rows = exec.execute();
    SparkPlan scan = new RDDScanExec(
        range.output(), rows, "Range", new UnknownPartitioning(rows.getNumPartitions()),
        RDDScanExec.apply$default$5(), Option.empty());
    return CollectionConverters.asScala(java.util.List.of(scan)).toList();
  }
}
