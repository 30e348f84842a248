package platform.sql;

/**
 * What an analyst sees when the SQL server refuses a request: "Refused by the SQL server:
 * what and why". Every refusal is counted by its reason ({@link SqlMetrics}).
 *
 * <p>Reasons (the label of {@code wap_sql_refusals_total}): {@code unauthenticated} (no
 * credential the server knows), {@code not_granted} (a view the identity's teams may not read,
 * or no such view), {@code concurrency} (more statements at once than
 * {@code access.max_statements}), {@code identity} (a session of another identity),
 * {@code rpc} (artifacts, an RPC
 * analysts do not need), {@code data_source}, {@code read} (anything but the catalog's views),
 * {@code write} (commands), {@code cache}, {@code client_code}, {@code setting},
 * {@code metadata} (DESCRIBE/SHOW beyond the views' columns), {@code statement_size},
 * {@code statement_depth}, {@code partitions} (more than a statement may ask for),
 * {@code function} (a function off the analysts' list), {@code pattern} (a regular expression or
 * LIKE pattern that cannot be checked).
 *
 * <p>An {@link UnsupportedOperationException}, so a PySpark client raises its
 * {@code UnsupportedOperationException} with this message.
 */
public final class Refusal extends UnsupportedOperationException {
  /** How every refusal's message begins. */
  static final String PREFIX = "Refused by the SQL server";
  private static final long serialVersionUID = 1L;
  private final String reason;

  private Refusal(String reason, String message) {
    super(PREFIX + ": " + message + ".");
    this.reason = reason;
  }

  /** A refusal for {@code reason}, counted; the caller throws it. */
  public static Refusal of(String reason, String message) {
    SqlMetrics.refused(reason);
    Refusal refusal = new Refusal(reason, message);
    Call call = Call.current();
    if (call != null) {
      call.refused(refusal); // the audit record's reason
    }
    return refusal;
  }

  /** The label it is counted under. */
  public String reason() {
    return reason;
  }
}
