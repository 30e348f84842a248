package platform.sql;

import java.util.Set;
import java.util.TreeSet;

/**
 * Who a Spark Connect call is, as its bearer credential proved it ({@link Identities}): a name
 * (the audit's, and the user id the call's session is bound to), teams, how it was proved
 * ({@code token}, {@code service}, {@code oidc}) and the catalog views its teams are granted,
 * fixed when the credential was identified (so one call sees one set of grants).
 */
record Identity(String name, Set<String> teams, String source, Set<String> granted) {

  /** A service of the platform (its token is in the settings): it multiplexes many callers
   * and bounds its own statements, so the per-identity bound does not apply to it. */
  boolean service() {
    return "service".equals(source);
  }

  boolean grants(String view) {
    return granted.contains(view);
  }

  /** The declared teams among this identity's, each a label value of the metrics ("none" for
   * an identity of none): never a name, and never a team a token or a claim made up. */
  Set<String> labels(Set<String> declared) {
    Set<String> labels = new TreeSet<>(teams);
    labels.retainAll(declared);
    return labels.isEmpty() ? Set.of("none") : labels;
  }
}
