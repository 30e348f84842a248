package platform.sql;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The audit of the SQL server's statements: one record per ExecutePlan call, as it ended.
 *
 * <p>A {@code spark.sql(query)} that Spark answers with the query itself (the client runs
 * it with its next call) is not a record of its own: the next call, which reads, is; a
 * refused one is.
 *
 * <p>Who (the identity the credential proved, never the client's user id), when, the views
 * the analysed plan read ({@link Grants} records them), the outcome ({@code ok}, {@code
 * refused} and the guard's reason, {@code failed} and the error, cleaned as analysts read it),
 * the rows it returned (Spark Connect's own count of the rows it sent), its duration and its
 * text (a DataFrame's plan described by its relations, {@link Statements}).
 *
 * <p>Records wait in a bounded queue until the Python host drains it ({@link #drain}, every
 * {@code access.refresh_s}), masks the texts' literals and writes each to the audit log and
 * its Kafka topic ({@code access/audit.py}). A full queue drops the newest records and counts
 * them ({@link #dropped}, on {@code /metrics}): the server never waits on its audit.
 */
public final class Audit {
  private static final int MAX_QUEUED = 100_000;
  /** A statement followed this long with no end reported is recorded as failed. */
  private static final long STALE_MS = 3_600_000;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final ConcurrentLinkedQueue<Map<String, Object>> QUEUE =
      new ConcurrentLinkedQueue<>();
  private static final AtomicInteger QUEUED = new AtomicInteger();
  private static final AtomicLong DROPPED = new AtomicLong();

  private Audit() {}

  /** The statement of {@code call} ended: {@code outcome} ok, refused or failed. */
  static void ended(Call call, String outcome, String reason, Long rows, long endMs) {
    if ("ok".equals(outcome)
        && call.holdUntilClosed(() -> record(call, outcome, reason, rows, endMs))) {
      return; // recorded when its answer is sent (a query handed back is no record)
    }
    record(call, outcome, reason, rows, endMs);
  }

  private static void record(Call call, String outcome, String reason, Long rows, long endMs) {
    if (!call.end()) {
      return; // recorded already, by the other of the events that end a statement
    }
    if (call.audited && !("ok".equals(outcome) && call.deferred())) {
      SqlMetrics.teamStatement(call.identity, outcome);
      queue(call.identity, outcome, reason, new ArrayList<>(call.views), rows,
          Math.max(0, endMs - call.startedMs), call.text, call.startedMs);
    }
  }

  /**
   * The statement of {@code call} ended with an error ({@code message}, as the analyst reads
   * it): refused when the guard refused it, else failed.
   */
  static void failed(Call call, String message, long endMs) {
    Call.running(call.operationId, true);
    Refusal refusal = call.refusal();
    String text = message == null ? "" : message;
    if (refusal != null || text.contains(Refusal.PREFIX)) {
      String reason = refusal == null ? text : refusal.reason() + ": " + refusal.getMessage();
      ended(call, "refused", reason, null, endMs);
    } else {
      ended(call, "failed", text, null, endMs);
    }
  }

  /** A statement refused before Spark saw it (at the protocol): recorded at once. */
  static void refused(Identity identity, String text, String reason) {
    SqlMetrics.teamStatement(identity, "refused");
    long now = System.currentTimeMillis();
    queue(identity, "refused", reason, List.of(), null, 0, text, now);
  }

  private static void queue(Identity identity, String outcome, String reason, List<String> views,
      Long rows, long durationMs, String text, long atMs) {
    long began = System.nanoTime();
    if (QUEUED.incrementAndGet() > MAX_QUEUED) {
      QUEUED.decrementAndGet();
      DROPPED.incrementAndGet();
      return;
    }
    Map<String, Object> record = new LinkedHashMap<>();
    record.put("identity", identity.name());
    record.put("teams", new TreeSet<>(identity.teams()));
    record.put("source", identity.source());
    record.put("outcome", outcome);
    record.put("reason", reason == null ? null : ErrorText.clean(reason));
    record.put("views", new TreeSet<>(views));
    record.put("rows", rows);
    record.put("duration_ms", durationMs);
    record.put("statement", text);
    record.put("at_ms", atMs);
    QUEUE.add(record);
    SqlMetrics.access("audit", began);
  }

  /** Up to {@code most} records, oldest first, as a JSON array (read by the host, py4j). */
  public static String drain(int most) throws JsonProcessingException {
    for (Call lost : Call.stale(STALE_MS)) { // no event ever told how it ended
      record(lost, "failed", "its end was never reported", null, System.currentTimeMillis());
    }
    List<Map<String, Object>> out = new ArrayList<>();
    Map<String, Object> record;
    while (out.size() < most && (record = QUEUE.poll()) != null) {
      QUEUED.decrementAndGet();
      out.add(record);
    }
    return JSON.writeValueAsString(out);
  }

  /** Records dropped because the host did not drain the queue in time. */
  public static long dropped() {
    return DROPPED.get();
  }
}
