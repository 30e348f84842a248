package platform.sql;

import java.util.Map;
import java.util.regex.Pattern;

import org.apache.spark.connect.proto.FetchErrorDetailsResponse;
import org.sparkproject.connect.google_protos.rpc.ErrorInfo;
import org.sparkproject.connect.google_protos.rpc.Status;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;

/**
 * What an analyst reads of an error: its condition and message, never the plan Spark appends
 * to an analysis error (which names the lake's paths and the columns a view hides), a path,
 * or a stack.
 *
 * <p>{@link ProtocolGuard} passes every error the server sends through {@link #clean}: the
 * gRPC status's description, the status details in its trailers (the message and the
 * parameters of Spark's {@code ErrorInfo}) and the answers of FetchErrorDetails.
 */
final class ErrorText {
  private static final int MAX_CHARS = 2000;
  private static final Pattern URI =
      Pattern.compile("\\b(?:file|hdfs|s3a?|s3n|gs|abfss?|wasbs?|dbfs|jar):/+[^\\s'\"`\\]),;]*");
  private static final Pattern ABSOLUTE =
      Pattern.compile("(?<![\\w'\"`/.:-])/(?:[^\\s/'\"`\\]),;]+/)+[^\\s'\"`\\]),;]*");
  private static final Metadata.Key<byte[]> DETAILS =
      Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER);

  private ErrorText() {}

  /** {@code message} without the plan after it, paths replaced by {@code <path>}. */
  static String clean(String message) {
    if (message == null) {
      return null;
    }
    String text = message;
    int plan = text.indexOf(";\n");
    if (plan >= 0) {
      text = text.substring(0, plan);
    }
    text = URI.matcher(text).replaceAll("<path>");
    text = ABSOLUTE.matcher(text).replaceAll("<path>");
    return text.length() > MAX_CHARS ? text.substring(0, MAX_CHARS) + "..." : text;
  }

  /** The trailers' status details, cleaned (the stack and any parameters' paths too). */
  static void clean(Metadata trailers) {
    if (trailers == null || !trailers.containsKey(DETAILS)) {
      return;
    }
    try {
      Status status = Status.parseFrom(trailers.get(DETAILS));
      Status.Builder cleaned = status.toBuilder().setMessage(clean(status.getMessage()))
          .clearDetails();
      for (Any detail : status.getDetailsList()) {
        if (detail.is(ErrorInfo.class)) {
          ErrorInfo info = detail.unpack(ErrorInfo.class);
          ErrorInfo.Builder kept = info.toBuilder().clearMetadata();
          for (Map.Entry<String, String> entry : info.getMetadataMap().entrySet()) {
            if (!entry.getKey().equals("stackTrace")) {
              kept.putMetadata(entry.getKey(), clean(entry.getValue()));
            }
          }
          cleaned.addDetails(Any.pack(kept.build()));
        } else {
          cleaned.addDetails(detail);
        }
      }
      trailers.removeAll(DETAILS);
      trailers.put(DETAILS, cleaned.build().toByteArray());
    } catch (InvalidProtocolBufferException unreadable) {
      trailers.removeAll(DETAILS);
    }
  }

  /**
   * A FetchErrorDetails answer with every message cleaned and no stack; an error that only
   * wraps another (a subquery's or a broadcast's failure, {@code "Exception thrown in
   * awaitResult: "}) reads as the error it wraps: a statement with a subquery cancelled at
   * the time limit says so, where the analyst read the wrapper's empty message.
   */
  static FetchErrorDetailsResponse clean(FetchErrorDetailsResponse response) {
    FetchErrorDetailsResponse.Builder cleaned = response.toBuilder().clearErrors();
    for (FetchErrorDetailsResponse.Error error : response.getErrorsList()) {
      FetchErrorDetailsResponse.Error.Builder kept = error.toBuilder().clearStackTrace()
          .setMessage(clean(unwrapped(response, error)));
      if (error.hasSparkThrowable()) {
        FetchErrorDetailsResponse.SparkThrowable.Builder throwable =
            error.getSparkThrowable().toBuilder().clearMessageParameters();
        error.getSparkThrowable().getMessageParametersMap()
            .forEach((key, value) -> throwable.putMessageParameters(key, clean(value)));
        kept.setSparkThrowable(throwable);
      }
      cleaned.addErrors(kept);
    }
    return cleaned.build();
  }

  private static final String WRAPPER = "Exception thrown in awaitResult:";

  /** {@code error}'s message, or that of the first error it wraps that says something. */
  private static String unwrapped(
      FetchErrorDetailsResponse response, FetchErrorDetailsResponse.Error error) {
    FetchErrorDetailsResponse.Error current = error;
    for (int hops = 0; hops < response.getErrorsCount(); hops++) {
      String message = current.getMessage();
      if (message == null || !message.trim().startsWith(WRAPPER)
          || !message.trim().substring(WRAPPER.length()).isBlank() || !current.hasCauseIdx()
          || current.getCauseIdx() >= response.getErrorsCount()) {
        return message;
      }
      current = response.getErrors(current.getCauseIdx());
    }
    return current.getMessage();
  }
}
