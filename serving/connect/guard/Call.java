package platform.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.connect.service.ExecuteHolder;
import org.apache.spark.sql.connect.service.ExecuteKey;
import org.apache.spark.sql.connect.service.SparkConnectService$;

import scala.Option;

/**
 * One Spark Connect call of an identity, as the guard follows it: who made it, and, for an
 * ExecutePlan statement, its operation, its text, the views its analysed plan read and how it
 * ended (the audit record, {@link Audit}).
 *
 * <p>{@link ProtocolGuard} makes it {@link #current} while Spark handles the call: the analyser
 * runs on that gRPC thread for AnalyzePlan, and for ExecutePlan on the execution thread Spark
 * creates in the same callback, which inherits it (an {@link InheritableThreadLocal}, as it
 * inherits the call's scheduler pool). So the rules that decide what a plan may read
 * ({@link Grants}) know who asks without trusting anything the client sent.
 *
 * <p>Statements being run are kept by operation until they end, which is what bounds one
 * identity's statements ({@link #admit}).
 */
final class Call {
  private static final InheritableThreadLocal<Call> CURRENT = new InheritableThreadLocal<>();
  private static final Map<String, Call> RUNNING = new ConcurrentHashMap<>();
  /** A statement admitted whose execution Spark has not registered yet counts this long. */
  private static final long STARTING_MS = 30_000;

  final Identity identity;
  final String sessionId;
  final String operationId;
  final String text;
  final boolean audited;
  final long startedMs = System.currentTimeMillis();
  final Set<String> views = new ConcurrentSkipListSet<>();
  private final AtomicBoolean ended = new AtomicBoolean();
  private volatile boolean closed;
  private volatile Refusal refusal;
  private volatile boolean deferred;
  private final boolean sqlCommand;
  private Runnable pending;

  private Call(Identity identity, String sessionId, String operationId, String text,
      boolean audited, boolean sqlCommand) {
    this.identity = identity;
    this.sessionId = sessionId;
    this.operationId = operationId;
    this.text = text;
    this.audited = audited;
    this.sqlCommand = sqlCommand;
  }

  /** A call that runs no statement (AnalyzePlan, Config, ...): only who makes it. */
  static Call of(Identity identity) {
    return new Call(identity, null, null, null, false, false);
  }

  /**
   * An ExecutePlan statement; {@code audited} is false for the server's health query and for
   * a plan that reads nothing but the rows it carries (a command's answer the client reads
   * back); {@code sqlCommand} for {@code spark.sql(...)}, whose answer may be the query handed
   * back ({@link #deferred}).
   */
  static Call statement(Identity identity, String sessionId, String operationId, String text,
      boolean audited, boolean sqlCommand) {
    return new Call(identity, sessionId, operationId, text, audited, sqlCommand);
  }

  /** The call this thread works for, or null (the server's own work, or no call). */
  static Call current() {
    return CURRENT.get();
  }

  /** Runs {@code body} with {@code call} current on this thread (and the threads it starts). */
  static void within(Call call, Runnable body) {
    Call before = CURRENT.get();
    CURRENT.set(call);
    try {
      body.run();
    } finally {
      CURRENT.set(before);
    }
  }

  /** Records that the analysed plan read {@code view}. */
  void read(String view) {
    if (operationId != null) {
      views.add(view);
    }
  }

  /** Records the guard's refusal of this call's statement (its reason goes to the audit). */
  void refused(Refusal why) {
    refusal = why;
  }

  Refusal refusal() {
    return refusal;
  }

  /**
   * {@code spark.sql(query)} answered with {@code relation}: a query is not run by this call
   * but handed back to the client, whose next ExecutePlan reads it (and is audited, with its
   * rows); a command's answer is its rows, already made.
   */
  void deferred(Relation relation) {
    deferred = switch (relation.getRelTypeCase()) {
      case LOCAL_RELATION, CACHED_LOCAL_RELATION, CHUNKED_CACHED_LOCAL_RELATION -> false;
      default -> true;
    };
  }

  /** Whether the statement's answer was a query handed back to the client to run. */
  boolean deferred() {
    return deferred;
  }

  /**
   * Admits the statement {@code call} unless its identity already runs {@code most}: checked
   * and recorded at once, so two calls arriving together cannot both take the last place.
   * The platform's services are not bounded here (they bound their own callers).
   */
  static boolean admit(Call call, int most) {
    synchronized (RUNNING) {
      if (!call.identity.service() && running(call.identity.name()) >= most) {
        return false;
      }
      RUNNING.put(call.operationId, call);
      return true;
    }
  }

  /** The statements of {@code name} still running (not finished, failed or cancelled). */
  static int running(String name) {
    int count = 0;
    for (Call call : new ArrayList<>(RUNNING.values())) {
      if (call.identity.name().equals(name) && call.running()) {
        count++;
      }
    }
    return count;
  }

  private boolean running() {
    if (ended.get()) {
      return false;
    }
    Option<ExecuteHolder> holder;
    try {
      holder = SparkConnectService$.MODULE$.executionManager().getExecuteHolder(
          ExecuteKey.apply(identity.name(), sessionId, operationId));
    } catch (RuntimeException | LinkageError notServing) {
      return true;
    }
    if (holder.isEmpty()) { // not registered yet, or never will be (the call failed first)
      return !closed && System.currentTimeMillis() - startedMs < STARTING_MS;
    }
    String status = holder.get().getExecuteInfo().status().getClass().getSimpleName();
    return !List.of("Finished$", "Failed$", "Canceled$", "Closed$").contains(status);
  }

  /**
   * Holds the successful end of a {@code spark.sql(...)} until its answer has been sent
   * (whether it was a query handed back is known then); false when there is nothing to wait
   * for, and the caller ends it now.
   */
  synchronized boolean holdUntilClosed(Runnable finish) {
    if (!sqlCommand || closed) {
      return false;
    }
    pending = finish;
    return true;
  }

  /** The gRPC call ended (its results sent, or an error): a statement that never started
   * stops counting, and a held end is recorded. */
  void closed() {
    Runnable held;
    synchronized (this) {
      closed = true;
      held = pending;
      pending = null;
    }
    if (held != null) {
      held.run();
    }
  }

  /** The statement of {@code operationId}, if one is being followed. */
  static Call running(String operationId, boolean remove) {
    if (operationId == null) {
      return null;
    }
    return remove ? RUNNING.remove(operationId) : RUNNING.get(operationId);
  }

  /** True once: the first of the events that end the statement records it. */
  boolean end() {
    return ended.compareAndSet(false, true);
  }

  /** Statements whose end no event ever told (kept at most an hour), dropped. */
  static List<Call> stale(long olderThanMs) {
    List<Call> stale = new ArrayList<>();
    long now = System.currentTimeMillis();
    RUNNING.values().removeIf(call -> {
      boolean old = now - call.startedMs > olderThanMs && !call.running();
      if (old) {
        stale.add(call);
      }
      return old;
    });
    return stale;
  }
}
