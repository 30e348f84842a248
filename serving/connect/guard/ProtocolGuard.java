package platform.sql;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.connect.proto.ConfigRequest;
import org.apache.spark.connect.proto.ConfigResponse;
import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.FetchErrorDetailsResponse;
import org.apache.spark.connect.proto.KeyValue;
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

import scala.Option;

/**
 * The SQL server's gRPC interceptor ({@code spark.connect.grpc.interceptor.classes}): deny by
 * default, at the protocol, before Spark handles a call.
 *
 * <ul>
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

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String method = call.getMethodDescriptor().getBareMethodName();
    if (!ReadOnlyGuard.started()) {
      // Spark Connect listens while the driver starts; a session made now would be cut from
      // a Spark session other than the server's, whose catalog stays empty for good.
      call.close(org.sparkproject.connect.grpc.Status.UNAVAILABLE.withDescription(
          "the SQL server is starting; try again in a few seconds"), new Metadata());
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
    return new CheckingListener<>(next.startCall(guarded, headers), guarded);
  }

  /**
   * Closes {@code call} with PERMISSION_DENIED and the refusal's message, described as Spark
   * describes its errors (so a client raises the same exception as for a refused plan).
   */
  static void refuse(ServerCall<?, ?> call, Refusal refusal) {
    ErrorInfo info = ErrorInfo.newBuilder()
        .setReason(Refusal.class.getName())
        .setDomain("org.apache.spark")
        .putMetadata("classes", "[\"" + Refusal.class.getName()
            + "\",\"java.lang.UnsupportedOperationException\",\"java.lang.RuntimeException\"]")
        .build();
    Status status = Status.newBuilder()
        .setCode(Code.PERMISSION_DENIED_VALUE)
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

    GuardedCall(ServerCall<Q, R> call) {
      super(call);
    }

    @Override
    public void close(org.sparkproject.connect.grpc.Status status, Metadata trailers) {
      closed = true;
      ErrorText.clean(trailers);
      super.close(status.withDescription(ErrorText.clean(status.getDescription())), trailers);
    }

    @Override
    @SuppressWarnings("unchecked")
    public void sendMessage(R message) {
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
    private boolean refused;
    private String sessionId;

    CheckingListener(ServerCall.Listener<Q> delegate, GuardedCall<Q, R> call) {
      super(delegate);
      this.call = call;
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
          if (message instanceof ExecutePlanRequest) {
            SqlMetrics.statement("refused");
          }
          refuse(call, refusal);
          return;
        }
      }
      if (message instanceof ConfigRequest config
          && config.getOperation().getOpTypeCase() == ConfigRequest.Operation.OpTypeCase.GET_ALL) {
        call.filterSettings = true;
      }
      if (message instanceof ExecutePlanRequest execute) {
        sessionId = execute.getSessionId();
      }
      super.onMessage(message);
    }

    @Override
    public void onHalfClose() {
      if (refused) {
        return;
      }
      Option<SparkContext> context =
          sessionId == null ? Option.empty() : SparkContext$.MODULE$.getActive();
      if (context.isEmpty()) {
        super.onHalfClose();
        return;
      }
      // The execution thread Spark starts in this call inherits this thread's local properties.
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
