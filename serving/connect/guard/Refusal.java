package platform.sql;

/**
 * What an analyst sees when the SQL server refuses a request: "Refused by the SQL server:
 * what and why". Every refusal is counted by its reason ({@link SqlMetrics}).
 *
 * <p>Reasons (the label of {@code wap_sql_refusals_total}): {@code rpc} (artifacts, an RPC
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
  private static final long serialVersionUID = 1L;
  private final String reason;

  private Refusal(String reason, String message) {
    super("Refused by the SQL server: " + message + ".");
    this.reason = reason;
  }

  /** A refusal for {@code reason}, counted; the caller throws it. */
  public static Refusal of(String reason, String message) {
    SqlMetrics.refused(reason);
    return new Refusal(reason, message);
  }

  /** The label it is counted under. */
  public String reason() {
    return reason;
  }
}
