package platform.sql;

import java.security.Key;
import java.security.PublicKey;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.jsonwebtoken.Claims;
import io.jsonwebtoken.JwtException;
import io.jsonwebtoken.JwtParser;
import io.jsonwebtoken.Jwts;
import io.jsonwebtoken.LocatorAdapter;
import io.jsonwebtoken.ProtectedHeader;
import io.jsonwebtoken.security.Jwk;
import io.jsonwebtoken.security.Jwks;

/**
 * An identity provider's signed tokens (OIDC access or ID tokens, JWT) as Spark Connect bearer
 * credentials, checked as {@code access/oidc.py} checks them for the serving API: the
 * signature verifies against a key of the provider's JWKS with an allowed public-key algorithm
 * (never {@code none}, never a shared-secret HS*), the token names the configured issuer (and
 * audience) and has an expiry, a subject and not expired. The name and teams are read from the
 * configured claims.
 *
 * <p>The JVM fetches nothing: the host reads the provider's JWKS and pushes it with the
 * settings ({@link #configure}); a token naming a key the JWKS lacks sets {@link
 * #unknownKeySeen}, and the host reads the JWKS again at its next refresh. Verified tokens are
 * kept by digest until they expire, so a client's calls pay the signature check once.
 */
public final class Oidc {
  private static final int KEPT = 4096;
  private static final ObjectMapper JSON = new ObjectMapper();

  private record Config(String issuer, String audience, String nameClaim, String teamsClaim,
      Set<String> algorithms, Map<String, PublicKey> keys, JwtParser parser) { }

  private record Verified(long expiresMs, String name, Set<String> teams) { }

  private static volatile Config config;
  private static volatile boolean unknownKey;
  private static final Map<String, Verified> VERIFIED = new LinkedHashMap<>(256, 0.75f, false) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Verified> eldest) {
      return size() > KEPT;
    }
  };

  private Oidc() {}

  /**
   * The provider's settings and keys: {@code {"issuer", "audience", "name_claim",
   * "teams_claim", "algorithms": [...], "jwks": "<the JWKS document>"}}.
   */
  public static void configure(String json) throws java.io.IOException {
    JsonNode root = JSON.readTree(json);
    Set<String> algorithms = new TreeSet<>();
    root.path("algorithms").forEach(a -> algorithms.add(a.asText()));
    Map<String, PublicKey> keys = new LinkedHashMap<>();
    for (Jwk<?> jwk : Jwks.setParser().ignoreUnsupported(true).build()
        .parse(root.path("jwks").asText()).getKeys()) {
      if (jwk.toKey() instanceof PublicKey key) {
        keys.put(jwk.getId() == null ? "" : jwk.getId(), key);
      }
    }
    String audience = root.path("audience").isTextual() ? root.path("audience").asText() : null;
    String issuer = root.path("issuer").asText();
    Map<String, PublicKey> fixed = Map.copyOf(keys);
    var builder = Jwts.parser().requireIssuer(issuer).keyLocator(new LocatorAdapter<Key>() {
      @Override
      protected Key locate(ProtectedHeader header) {
        if (!algorithms.contains(header.getAlgorithm())) {
          throw new JwtException("algorithm not accepted");
        }
        PublicKey key = fixed.get(header.getKeyId() == null ? "" : header.getKeyId());
        if (key == null && header.getKeyId() == null && fixed.size() == 1) {
          key = fixed.values().iterator().next();
        }
        if (key == null) {
          unknownKey = true;
          throw new JwtException("unknown key");
        }
        return key;
      }
    });
    if (audience != null) {
      builder.requireAudience(audience);
    }
    config = new Config(issuer, audience, root.path("name_claim").asText(),
        root.path("teams_claim").asText(), Set.copyOf(algorithms), fixed, builder.build());
    synchronized (VERIFIED) {
      VERIFIED.clear();
    }
  }

  /** Whether a token named a key the pushed JWKS lacks since the last call (then cleared). */
  public static boolean unknownKeySeen() {
    boolean seen = unknownKey;
    unknownKey = false;
    return seen;
  }

  /** Who the signed token {@code text} proves to be; null when it does not verify. */
  static Identity identify(String text) {
    Config current = config;
    if (current == null || text.chars().filter(c -> c == '.').count() != 2) {
      return null;
    }
    String digest = Identities.digest(text);
    Verified kept;
    synchronized (VERIFIED) {
      kept = VERIFIED.get(digest);
    }
    if (kept == null) {
      kept = verify(current, text);
      if (kept == null) {
        return null;
      }
      synchronized (VERIFIED) {
        VERIFIED.put(digest, kept);
      }
    }
    if (System.currentTimeMillis() >= kept.expiresMs()) {
      return null;
    }
    return Identities.of(kept.name(), kept.teams(), "oidc");
  }

  private static Verified verify(Config current, String text) {
    Claims claims;
    try {
      claims = current.parser().parseSignedClaims(text).getPayload();
    } catch (JwtException | IllegalArgumentException | ClassCastException invalid) {
      return null;
    }
    Date expires = claims.getExpiration();
    if (expires == null || claims.getSubject() == null
        || (current.audience() == null && claims.get("aud") != null)) {
      return null; // PyJWT's rules: exp, iss and sub required; an audience only when expected
    }
    Object named = claims.get(current.nameClaim());
    String name = named == null ? claims.getSubject() : String.valueOf(named);
    Set<String> teams = new TreeSet<>();
    Object claimed = claims.get(current.teamsClaim());
    if (claimed instanceof String words) {
      for (String word : words.trim().split("\\s+")) {
        if (!word.isEmpty()) {
          teams.add(word);
        }
      }
    } else if (claimed instanceof Collection<?> values) {
      values.forEach(value -> teams.add(String.valueOf(value)));
    }
    return new Verified(expires.getTime(), name, Set.copyOf(teams));
  }
}
