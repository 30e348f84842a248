package platform.sql;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.connect.proto.ConfigRequest;
import org.apache.spark.connect.proto.ConfigResponse;
import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.ExecutePlanResponse;
import org.apache.spark.connect.proto.FetchErrorDetailsResponse;
import org.apache.spark.connect.proto.KeyValue;
import org.apache.spark.connect.proto.UserContext;
import org.sparkproject.connect.google_protos.rpc.Code;
import org.sparkproject.connect.google_protos.rpc.ErrorInfo;
import org.sparkproject.connect.google_protos.rpc.Status;
import org.sparkproject.connect.grpc.ForwardingServerCall.SimpleForwardingServerCall;
import org.sparkproject.connect.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.ServerCall;
import org.sparkproject.connect.grpc.ServerCallHandler;
import org.sparkproject.connect.grpc.ServerInterceptor;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.protobuf.StatusProto;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.Descriptors.FieldDescriptor;
import org.sparkproject.connect.protobuf.Message;

import scala.Option;

/**
 * The SQL server's gRPC interceptor ({@code spark.connect.grpc.interceptor.classes}): deny by
 * default, at the protocol, before Spark handles a call.
 *
 * <ul>
 *   <li>Every call carries a bearer credential that {@link Identities} knows (an issued token,
 *       a service's token, an identity provider's signed token); any other is answered
 *       UNAUTHENTICATED, with no word of which part failed.
 *   <li>Every request is bound to that identity: its {@code user_context} is replaced by one
 *       naming the identity ({@link #bind}), so Spark keys the call's session by the proven
 *       name, a user id the client sent never counts, and two identities never share a
 *       session. While Spark handles the call, the identity is the thread's {@link Call}, which
 *       the analyser's rules read ({@link Grants}).
 *   <li>An identity runs at most {@code access.max_statements} ExecutePlan statements at once;
 *       one more is refused at once with RESOURCE_EXHAUSTED ({@link Call#admit}).
 *   <li>Every ExecutePlan statement is audited ({@link Audit}).
 *   <li>Only the RPCs a reading client needs are served: ExecutePlan, AnalyzePlan, Config,
 *       Interrupt, ReattachExecute, ReleaseExecute, ReleaseSession, FetchErrorDetails. Refused
 *       with PERMISSION_DENIED: AddArtifacts and ArtifactStatus (jars, classes, files,
 *       {@code copyFromLocalToFs}: code and files from the client), and any other.
 *   <li>Every request message is checked by {@link PlanRules} (data sources, caching,
 *       commands, settings) before it reaches Spark.
 *   <li>Config's GetAll answers leave out the settings analysts may not read.
 *   <li>Every error is sent as {@link ErrorText} cleans it: no plan, path or stack.
 *   <li>Each Connect session's statements run in a scheduler pool of their own (FAIR between
 *       pools), so one analyst's long job does not hold everyone else's. Pools are handed to
 *       sessions in the order they arrive, so the last {@link #POOLS} sessions never share
 *       one (a hash of the session id put two of ten sessions in one pool half the time).
 * </ul>
 */
public final class ProtocolGuard implements ServerInterceptor {
  private static final Set<String> SERVED = Set.of(
      "ExecutePlan", "AnalyzePlan", "Config", "Interrupt", "ReattachExecute", "ReleaseExecute",
      "ReleaseSession", "FetchErrorDetails");
  private static final int POOLS = 64;
  /** Sessions remembered for their pool; an older one that comes back gets a new pool. */
  private static final int REMEMBERED = 4096;
  private static final Map<String, String> POOL_OF = new LinkedHashMap<>(256, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
      return size() > REMEMBERED;
    }
  };
  private static int handedOut;

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String method = call.getMethodDescriptor().getBareMethodName();
    if (!ReadOnlyGuard.started() || !Identities.loaded()) {
      // Spark Connect listens while the driver starts; a session made now would be cut from
      // a Spark session other than the server's, whose catalog stays empty for good (and
      // until the host has told who may call, nobody is known).
      call.close(org.sparkproject.connect.grpc.Status.UNAVAILABLE.withDescription(
          "the SQL server is starting; try again in a few seconds"), new Metadata());
      return new ServerCall.Listener<>() { };
    }
    long identifying = System.nanoTime();
    Identity who = Identities.identify(bearer(headers));
    SqlMetrics.access("identify", identifying);
    if (who == null) {
      SqlMetrics.refused("unauthenticated");
      call.close(org.sparkproject.connect.grpc.Status.UNAUTHENTICATED.withDescription(
          "the SQL server does not accept this credential: use a token of your own "
          + "(platformctl access issue) or sign in to the identity provider again"),
          new Metadata());
      return new ServerCall.Listener<>() { };
    }
    if (!SERVED.contains(method)) {
      String what = method != null && method.contains("Artifact")
          ? "artifacts (jars, classes, files, copyFromLocalToFs) are not accepted: code and "
              + "files from clients do not reach the SQL server"
          : "the " + method + " call is not served to analysts";
      refuse(call, Refusal.of("rpc", what));
      SqlMetrics.statement("refused");
      return new ServerCall.Listener<>() { };
    }
    GuardedCall<Q, R> guarded = new GuardedCall<>(call);
    return new CheckingListener<>(next.startCall(guarded, headers), guarded, who);
  }

  /** The bearer credential of a call's headers, or null. */
  private static String bearer(Metadata headers) {
    String value = headers.get(AUTHORIZATION);
    if (value == null || !value.regionMatches(true, 0, "Bearer ", 0, 7)) {
      return null;
    }
    return value.substring(7).trim();
  }

  /**
   * {@code message} bound to {@code who}: its {@code user_context} replaced by one naming the
   * identity (the client's user id, name and extensions dropped), and an ExecutePlan's
   * operation id set when the client sent none (the statement is followed by it).
   */
  @SuppressWarnings("unchecked")
  static <Q> Q bind(Q message, Identity who) {
    if (!(message instanceof Message request)) {
      return message;
    }
    Message.Builder bound = request.toBuilder();
    FieldDescriptor user = request.getDescriptorForType().findFieldByName("user_context");
    if (user != null) {
      bound.setField(user, UserContext.newBuilder().setUserId(who.name())
          .setUserName(who.name()).build());
    }
    if (request instanceof ExecutePlanRequest execute && !execute.hasOperationId()) {
      bound.setField(request.getDescriptorForType().findFieldByName("operation_id"),
          UUID.randomUUID().toString());
    }
    return (Q) bound.build();
  }

  /**
   * Closes {@code call} with PERMISSION_DENIED and the refusal's message, described as Spark
   * describes its errors (so a client raises the same exception as for a refused plan).
   */
  static void refuse(ServerCall<?, ?> call, Refusal refusal) {
    refuse(call, refusal, Code.PERMISSION_DENIED_VALUE);
  }

  /** The same with another status {@code code} (RESOURCE_EXHAUSTED: too many statements). */
  static void refuse(ServerCall<?, ?> call, Refusal refusal, int code) {
    ErrorInfo info = ErrorInfo.newBuilder()
        .setReason(Refusal.class.getName())
        .setDomain("org.apache.spark")
        .putMetadata("classes", "[\"" + Refusal.class.getName()
            + "\",\"java.lang.UnsupportedOperationException\",\"java.lang.RuntimeException\"]")
        .build();
    Status status = Status.newBuilder()
        .setCode(code)
        .setMessage(refusal.getMessage())
        .addDetails(Any.pack(info))
        .build();
    StatusRuntimeException error = StatusProto.toStatusRuntimeException(status);
    call.close(error.getStatus(), error.getTrailers());
  }

  /** The call as the service sees it: remembers being closed, filters Config's GetAll. */
  private static final class GuardedCall<Q, R> extends SimpleForwardingServerCall<Q, R> {
    volatile boolean closed;
    volatile boolean filterSettings;
    /** The ExecutePlan statement this call runs, once its request is read. */
    volatile Call statement;

    GuardedCall(ServerCall<Q, R> call) {
      super(call);
    }

    @Override
    public void close(org.sparkproject.connect.grpc.Status status, Metadata trailers) {
      closed = true;
      ErrorText.clean(trailers);
      String description = ErrorText.clean(status.getDescription());
      Call running = statement;
      if (running != null) {
        running.closed();
        if (!status.isOk()) { // the listener's Failed event may come later, or never
          Audit.failed(running, description, System.currentTimeMillis());
        }
      }
      super.close(status.withDescription(description), trailers);
    }

    @Override
    @SuppressWarnings("unchecked")
    public void sendMessage(R message) {
      Call running = statement;
      if (running != null && message instanceof ExecutePlanResponse response
          && response.hasSqlCommandResult()) {
        running.deferred(response.getSqlCommandResult().getRelation());
      }
      if (message instanceof FetchErrorDetailsResponse details) {
        super.sendMessage((R) ErrorText.clean(details));
        return;
      }
      if (filterSettings && message instanceof ConfigResponse response) {
        ConfigResponse.Builder kept = response.toBuilder().clearPairs();
        for (KeyValue pair : response.getPairsList()) {
          if (Policy.readable(pair.getKey())) {
            kept.addPairs(pair);
          }
        }
        super.sendMessage((R) kept.build());
        return;
      }
      super.sendMessage(message);
    }
  }

  /** Checks each request before the service gets it; after a refusal, swallows the rest. */
  private static final class CheckingListener<Q, R> extends SimpleForwardingServerCallListener<Q> {
    private final GuardedCall<Q, R> call;
    private final Identity who;
    private boolean refused;
    private String sessionId;

    CheckingListener(ServerCall.Listener<Q> delegate, GuardedCall<Q, R> call, Identity who) {
      super(delegate);
      this.call = call;
      this.who = who;
    }

    @Override
    public void onMessage(Q message) {
      if (refused) {
        return;
      }
      if (!call.closed) {
        try {
          PlanRules.check(message);
        } catch (Refusal refusal) {
          refused = true;
          if (message instanceof ExecutePlanRequest execute) {
            SqlMetrics.statement("refused");
            Audit.refused(who, Statements.text(execute), refusal.reason() + ": "
                + refusal.getMessage());
          }
          refuse(call, refusal);
          return;
        }
      }
      long binding = System.nanoTime();
      Q bound = bind(message, who);
      SqlMetrics.access("bind", binding);
      if (bound instanceof ConfigRequest config
          && config.getOperation().getOpTypeCase() == ConfigRequest.Operation.OpTypeCase.GET_ALL) {
        call.filterSettings = true;
      }
      if (bound instanceof ExecutePlanRequest execute) {
        sessionId = execute.getSessionId();
        // The server's own health query (a service's session tagged so) is no analyst's read.
        boolean health = who.service() && execute.getTagsList().contains(SqlMetrics.HEALTH_TAG);
        call.statement = Call.statement(who, sessionId, execute.getOperationId(),
            Statements.text(execute), !health && !Statements.readsNothing(execute),
            Statements.sqlCommand(execute));
      }
      super.onMessage(bound);
    }

    @Override
    public void onHalfClose() {
      if (refused) {
        return;
      }
      Call statement = call.statement;
      long admitting = System.nanoTime();
      boolean admitted = statement == null || Call.admit(statement, Policy.get().maxStatements);
      if (statement != null) {
        SqlMetrics.access("admit", admitting);
      }
      if (!admitted) {
        refused = true;
        int most = Policy.get().maxStatements;
        Refusal busy = Refusal.of("concurrency", who.name() + " already runs " + most
            + " statement" + (most == 1 ? "" : "s") + " at once, the most one identity may "
            + "(access.max_statements); wait for one to end, or interrupt it, and ask again");
        SqlMetrics.statement("refused");
        Audit.refused(who, statement.text, busy.reason() + ": " + busy.getMessage());
        call.statement = null; // never admitted: its audit record is this one
        refuse(call, busy, Code.RESOURCE_EXHAUSTED_VALUE);
        return;
      }
      Call.within(statement != null ? statement : Call.of(who), this::handle);
    }

    private void handle() {
      Option<SparkContext> context =
          sessionId == null ? Option.empty() : SparkContext$.MODULE$.getActive();
      if (context.isEmpty()) {
        super.onHalfClose();
        return;
      }
      // The execution thread Spark starts in this call inherits this thread's local properties
      // (and its Call).
      context.get().setLocalProperty("spark.scheduler.pool", pool(sessionId));
      try {
        super.onHalfClose();
      } finally {
        context.get().setLocalProperty("spark.scheduler.pool", null);
      }
    }

    @Override
    public void onReady() {
      if (!refused) {
        super.onReady();
      }
    }

    @Override
    public void onCancel() {
      Call statement = call.statement;
      if (statement != null) {
        statement.closed(); // the client went away: its statement runs on, detached
      }
      super.onCancel();
    }
  }

  /**
   * The scheduler pool of a Connect session: one of {@link #POOLS}, the next in turn for a
   * session not seen before, the same one for all of a session's statements.
   */
  static String pool(String sessionId) {
    synchronized (POOL_OF) {
      return POOL_OF.computeIfAbsent(
          sessionId, id -> "analysts-" + Math.floorMod(handedOut++, POOLS));
    }
  }
}
