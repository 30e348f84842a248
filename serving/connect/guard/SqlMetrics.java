package platform.sql;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.DoubleAdder;
import java.util.concurrent.atomic.LongAdder;

import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.sql.connect.service.SparkConnectService$;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationCanceled;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationClosed;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationFailed;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationFinished;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted;

/**
 * The SQL server's figures, kept in the driver and read by {@code serving/connect/health.py}
 * ({@link #snapshot}) for {@code /metrics}. A listener ({@code spark.extraListeners}) of
 * Spark Connect's operation events and of job starts:
 *
 * <ul>
 *   <li>statements by outcome: {@code succeeded}, {@code failed}, {@code refused} (by a rule of
 *       the guard, at the protocol or in the plan), {@code timed_out} (the time limit),
 *       {@code cancelled} (by the client, or its client went away);
 *   <li>their durations (a histogram), refusals by reason ({@link Refusal});
 *   <li>Spark jobs by scheduler pool kind ({@code analysts}, {@code platform}, {@code default});
 *   <li>audited statements by team and outcome ({@code ok}, {@code refused}, {@code failed}):
 *       each declared team of the identity counts the statement once, an identity of none
 *       counts as {@code none}; never a name;
 *   <li>the time access takes, by part ({@link #access}): {@code identify} (a call's bearer),
 *       {@code bind} (its request to the identity), {@code admit} (the identity's bound),
 *       {@code grants} (the names a plan reads), {@code audit} (a record queued).
 * </ul>
 *
 * <p>The end of each statement is also its audit record's ({@link Audit}).
 *
 * <p>The server's own health query (its Spark session tag {@link #HEALTH_TAG}) is not counted.
 */
public final class SqlMetrics extends SparkListener {
  /** The Spark session tag of the server's health query. */
  public static final String HEALTH_TAG = "platform-health";
  private static final double[] BOUNDS_S = {
      0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

  private static final Map<String, LongAdder> STATEMENTS = new ConcurrentHashMap<>();
  private static final Map<String, LongAdder> REFUSALS = new ConcurrentHashMap<>();
  private static final Map<String, LongAdder> JOBS = new ConcurrentHashMap<>();
  private static final Map<String, LongAdder> TEAM_STATEMENTS = new ConcurrentHashMap<>();
  private static final Map<String, LongAdder[]> ACCESS = new ConcurrentHashMap<>();
  private static final LongAdder[] BUCKETS = new LongAdder[BOUNDS_S.length + 1];
  private static final DoubleAdder SECONDS = new DoubleAdder();
  private static final Map<String, Long> STARTED = new ConcurrentHashMap<>();
  private static final Set<String> TIMED_OUT = ConcurrentHashMap.newKeySet();

  static {
    for (int i = 0; i < BUCKETS.length; i++) {
      BUCKETS[i] = new LongAdder();
    }
  }

  static void refused(String reason) {
    REFUSALS.computeIfAbsent(reason, r -> new LongAdder()).increment();
  }

  static void statement(String outcome) {
    STATEMENTS.computeIfAbsent(outcome, o -> new LongAdder()).increment();
  }

  /** An audited statement of {@code identity} ended with {@code outcome}. */
  static void teamStatement(Identity identity, String outcome) {
    for (String team : identity.labels(Identities.declaredTeams())) {
      TEAM_STATEMENTS.computeIfAbsent(team + "|" + outcome, k -> new LongAdder()).increment();
    }
  }

  /** One run of access's {@code part}, begun at {@code startNanos} ({@link System#nanoTime}). */
  static void access(String part, long startNanos) {
    long took = System.nanoTime() - startNanos;
    LongAdder[] figures = ACCESS.computeIfAbsent(part, p -> new LongAdder[] {
        new LongAdder(), new LongAdder()});
    figures[0].increment();
    figures[1].add(took);
  }

  static void timedOut(String operationId) {
    TIMED_OUT.add(operationId);
  }

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    if (event instanceof SparkListenerConnectOperationStarted started) {
      if (!started.sparkSessionTags().contains(HEALTH_TAG)) {
        STARTED.put(started.operationId(), started.eventTime());
      }
    } else if (event instanceof SparkListenerConnectOperationFinished done) {
      Call call = Call.running(done.operationId(), true);
      if (call != null) {
        Object rows = done.producedRowCount().isDefined() ? done.producedRowCount().get() : null;
        Audit.ended(call, "ok", null, rows == null ? null : ((Number) rows).longValue(),
            done.eventTime());
      }
      end(done.operationId(), done.eventTime(), "succeeded");
    } else if (event instanceof SparkListenerConnectOperationFailed failed) {
      String message = failed.errorMessage() == null ? "" : failed.errorMessage();
      Call call = Call.running(failed.operationId(), true);
      if (call != null) {
        Audit.failed(call, message, failed.eventTime());
      }
      end(failed.operationId(), failed.eventTime(),
          message.contains(Refusal.PREFIX) ? "refused" : "failed");
    } else if (event instanceof SparkListenerConnectOperationCanceled cancelled) {
      Call call = Call.running(cancelled.operationId(), true);
      if (call != null) {
        Audit.ended(call, "failed", TIMED_OUT.contains(cancelled.operationId())
            ? "time_limit: cancelled " + StatementWatchdog.reason(Policy.get().timeLimitMs)
            : "cancelled (by the client, or its client went away)", null,
            cancelled.eventTime());
      }
      end(cancelled.operationId(), cancelled.eventTime(), "cancelled");
    } else if (event instanceof SparkListenerConnectOperationClosed closed) {
      Call call = Call.running(closed.operationId(), true);
      if (call != null) {
        Audit.ended(call, "failed", "closed before it ended", null, closed.eventTime());
      }
      STARTED.remove(closed.operationId());
      TIMED_OUT.remove(closed.operationId());
    }
  }

  private static void end(String operationId, long at, String outcome) {
    Long began = STARTED.remove(operationId);
    if (began == null) {
      return; // the health query, or counted already
    }
    boolean timedOut = TIMED_OUT.remove(operationId) && !outcome.equals("succeeded");
    statement(timedOut ? "timed_out" : outcome);
    double seconds = Math.max(0, at - began) / 1000.0;
    SECONDS.add(seconds);
    int bucket = 0;
    while (bucket < BOUNDS_S.length && seconds > BOUNDS_S[bucket]) {
      bucket++;
    }
    BUCKETS[bucket].increment();
  }

  @Override
  public void onJobStart(SparkListenerJobStart job) {
    String pool = job.properties() == null ? null
        : job.properties().getProperty("spark.scheduler.pool");
    String kind = pool == null || pool.equals("default") ? "default"
        : pool.startsWith("analysts-") ? "analysts" : pool;
    JOBS.computeIfAbsent(kind, k -> new LongAdder()).increment();
  }

  /** Every figure as one JSON object (read over py4j on each scrape). */
  public static String snapshot() {
    StringBuilder json = new StringBuilder("{");
    counts(json, "statements", STATEMENTS).append(',');
    counts(json, "refusals", REFUSALS).append(',');
    counts(json, "jobs", JOBS).append(',');
    counts(json, "team_statements", TEAM_STATEMENTS).append(',');
    json.append("\"audit_dropped\":").append(Audit.dropped()).append(',');
    json.append("\"access\":{");
    boolean first = true;
    for (Map.Entry<String, LongAdder[]> part : new TreeMap<>(ACCESS).entrySet()) {
      json.append(first ? "" : ",").append('"').append(part.getKey()).append("\":[")
          .append(part.getValue()[0].sum()).append(',').append(part.getValue()[1].sum())
          .append(']');
      first = false;
    }
    json.append("},");
    json.append("\"duration\":{\"bounds\":[");
    for (int i = 0; i < BOUNDS_S.length; i++) {
      json.append(i == 0 ? "" : ",").append(BOUNDS_S[i]);
    }
    json.append("],\"counts\":[");
    for (int i = 0; i < BUCKETS.length; i++) {
      json.append(i == 0 ? "" : ",").append(BUCKETS[i].sum());
    }
    json.append("],\"sum\":").append(SECONDS.sum()).append("},");
    int sessions = -1;
    int active = -1;
    try {
      sessions = SparkConnectService$.MODULE$.sessionManager().listActiveSessions().size();
      active = SparkConnectService$.MODULE$.executionManager().listExecuteHolders().size();
    } catch (RuntimeException | LinkageError notStarted) {
      // Spark Connect is not serving yet
    }
    Runtime runtime = Runtime.getRuntime();
    json.append("\"active_sessions\":").append(sessions)
        .append(",\"active_statements\":").append(active)
        .append(",\"memory_used\":").append(runtime.totalMemory() - runtime.freeMemory())
        .append(",\"memory_max\":").append(runtime.maxMemory())
        .append('}');
    return json.toString();
  }

  private static StringBuilder counts(StringBuilder json, String name, Map<String, LongAdder> m) {
    json.append('"').append(name).append("\":{");
    boolean first = true;
    for (Map.Entry<String, LongAdder> entry : new TreeMap<>(m).entrySet()) {
      json.append(first ? "" : ",").append('"').append(entry.getKey()).append("\":")
          .append(entry.getValue().sum());
      first = false;
    }
    return json.append('}');
  }
}
