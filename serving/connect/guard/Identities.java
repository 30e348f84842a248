package platform.sql;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Who may call the SQL server, as the Python host last told it ({@code
 * serving/connect/identities.py}, every {@code access.refresh_s}): the SHA-256 digests of the
 * credentials it accepts (issued tokens as {@code access_tokens} keeps them, the services'
 * tokens, the server's own {@code sql.token}) with the name, teams and source each proves, and
 * the views each declared team is granted. The table is replaced whole, so a revoked token
 * stops working at the next push; the JVM never holds a token, only digests. An identity
 * provider's signed tokens are checked by {@link Oidc}.
 */
public final class Identities {
  /** Longer credentials are nobody's (no token, service secret or JWT is this long). */
  private static final int MAX_CREDENTIAL_CHARS = 16_384;
  private static final ObjectMapper JSON = new ObjectMapper();

  private record Entry(String name, Set<String> teams, String source, long expiresMs) { }

  private record Table(Map<String, Entry> byDigest, Map<String, Set<String>> grants) { }

  private static volatile Table table;

  private Identities() {}

  /**
   * Replaces the table with {@code json}: {@code {"identities": [{"digest", "name", "teams",
   * "source", "expires_ms"}], "grants": {team: [view, ...]}}}. Called by the host over py4j.
   */
  public static void replace(String json) throws java.io.IOException {
    JsonNode root = JSON.readTree(json);
    Map<String, Entry> byDigest = new HashMap<>();
    for (JsonNode who : root.path("identities")) {
      byDigest.put(who.path("digest").asText(), new Entry(who.path("name").asText(),
          strings(who.path("teams")), who.path("source").asText(), who.path("expires_ms").asLong()));
    }
    Map<String, Set<String>> grants = new HashMap<>();
    for (Map.Entry<String, JsonNode> team : root.path("grants").properties()) {
      grants.put(team.getKey(), strings(team.getValue()));
    }
    table = new Table(Map.copyOf(byDigest), Map.copyOf(grants));
  }

  /** Whether the host has told the table once (before, the server answers UNAVAILABLE). */
  static boolean loaded() {
    return table != null;
  }

  /** The teams the declarations know: the only values of the metrics' team label. */
  static Set<String> declaredTeams() {
    Table current = table;
    return current == null ? Set.of() : current.grants().keySet();
  }

  /** Who {@code credential} proves to be, or null: unknown, expired, revoked or malformed. */
  static Identity identify(String credential) {
    Table current = table;
    if (current == null || credential == null || credential.isEmpty()
        || credential.length() > MAX_CREDENTIAL_CHARS) {
      return null;
    }
    Entry entry = current.byDigest().get(digest(credential));
    if (entry != null) {
      if (entry.expiresMs() > 0 && System.currentTimeMillis() >= entry.expiresMs()) {
        return null;
      }
      return of(entry.name(), entry.teams(), entry.source());
    }
    return Oidc.identify(credential);
  }

  /** The identity of {@code name} and {@code teams}, with the views those teams are granted. */
  static Identity of(String name, Set<String> teams, String source) {
    Table current = table;
    Set<String> granted = new HashSet<>();
    if (current != null) {
      for (String team : teams) {
        granted.addAll(current.grants().getOrDefault(team, Set.of()));
      }
    }
    return new Identity(name, Set.copyOf(teams), source, Set.copyOf(granted));
  }

  static String digest(String text) {
    try {
      byte[] hash = MessageDigest.getInstance("SHA-256")
          .digest(text.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(hash);
    } catch (NoSuchAlgorithmException impossible) {
      throw new IllegalStateException(impossible);
    }
  }

  private static Set<String> strings(JsonNode array) {
    Set<String> values = new TreeSet<>();
    for (JsonNode value : array) {
      values.add(value.asText());
    }
    return values;
  }
}
