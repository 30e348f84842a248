package platform.sql;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.connect.service.ExecuteHolder;
import org.apache.spark.sql.connect.service.SparkConnectService$;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The time limit of a Spark Connect statement: every second, each operation older than
 * {@code sql.time_limit_s} has its Spark jobs cancelled with a reason the analyst reads;
 * one still running five seconds later (planning, or between jobs) is interrupted.
 *
 * <p>Operations whose client went away are ended by Spark itself after
 * {@code spark.connect.execute.manager.detachedTimeout} (set from
 * {@code sql.detached_timeout_s}).
 */
public final class StatementWatchdog {
  private static final long INTERRUPT_AFTER_NS = TimeUnit.SECONDS.toNanos(5);
  private static final Set<String> DONE = Set.of("Finished$", "Failed$", "Canceled$", "Closed$");
  private static final Map<String, Long> CANCELLED = new ConcurrentHashMap<>();
  private static ScheduledExecutorService timer;

  private StatementWatchdog() {}

  /** Starts the watchdog's thread (once). */
  public static synchronized void start() {
    if (timer != null) {
      return;
    }
    timer = Executors.newSingleThreadScheduledExecutor(task -> {
      Thread thread = new Thread(task, "sql-statement-watchdog");
      thread.setDaemon(true);
      return thread;
    });
    timer.scheduleWithFixedDelay(StatementWatchdog::check, 1, 1, TimeUnit.SECONDS);
  }

  private static void check() {
    try {
      long limitMs = Policy.get().timeLimitMs;
      long now = System.nanoTime();
      Set<String> live = new HashSet<>();
      for (ExecuteHolder holder : CollectionConverters.asJava(
          SparkConnectService$.MODULE$.executionManager().listExecuteHolders())) {
        String id = holder.operationId();
        live.add(id);
        if ((now - holder.creationTimeNs()) / 1_000_000 <= limitMs || finished(holder)) {
          continue;
        }
        Long cancelledAt = CANCELLED.putIfAbsent(id, now);
        if (cancelledAt == null) {
          SqlMetrics.timedOut(id);
          holder.sessionHolder().session().sparkContext()
              .cancelJobsWithTag(holder.jobTag(), reason(limitMs));
        } else if (cancelledAt != Long.MIN_VALUE && now - cancelledAt > INTERRUPT_AFTER_NS) {
          CANCELLED.put(id, Long.MIN_VALUE);
          holder.interrupt();
        }
      }
      CANCELLED.keySet().retainAll(live);
    } catch (RuntimeException | LinkageError error) {
      // the Connect service is starting or stopping: try again in a second
    }
  }

  private static boolean finished(ExecuteHolder holder) {
    return DONE.contains(holder.getExecuteInfo().status().getClass().getSimpleName());
  }

  static String reason(long limitMs) {
    return "because the statement ran longer than the SQL server's time limit of "
        + (limitMs / 1000.0) + " s (sql.time_limit_s); narrow its time range, aggregate more "
        + "or add a LIMIT";
  }
}
