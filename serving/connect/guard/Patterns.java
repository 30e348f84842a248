package platform.sql;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.expressions.Expression;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Regular expressions and LIKE patterns an analyst may match with: constants, in a form whose
 * matching time is polynomial in the text, not exponential.
 *
 * <p>Java's regex engine backtracks and ignores interrupts: {@code (.*a){12}$} over a few dozen
 * characters holds a core for hours, past any cancellation. A pattern is refused when it is
 * not a constant (it could not be checked), longer than {@value #MAX_CHARS} characters, or has
 * a back reference or lookaround, a quantified group that holds a quantifier or an alternation
 * ({@code (a+)+}, {@code (a|aa)*}: exponential), more than {@value #MAX_UNBOUNDED} unbounded
 * quantifiers ({@code .*}, {@code +}, <code>{n,}</code>), or a count above
 * {@value #MAX_COUNT}; a LIKE pattern with more than {@value #MAX_UNBOUNDED} {@code %}. What
 * stays polynomial is bounded by the statement's time limit.
 */
final class Patterns {
  static final int MAX_CHARS = 1000;
  static final int MAX_UNBOUNDED = 3;
  static final int MAX_COUNT = 1000;

  /** Expressions (by class, or by name before they are resolved) whose arguments at these
   * positions are regular expressions; {@code like} and {@code ilike} take LIKE patterns. */
  private static final Map<String, List<Integer>> REGEX_ARGUMENTS = Map.ofEntries(
      Map.entry("RLike", List.of(1)), Map.entry("rlike", List.of(1)),
      Map.entry("regexp", List.of(1)), Map.entry("regexp_like", List.of(1)),
      Map.entry("RegExpExtract", List.of(1)), Map.entry("regexp_extract", List.of(1)),
      Map.entry("RegExpExtractAll", List.of(1)), Map.entry("regexp_extract_all", List.of(1)),
      Map.entry("RegExpReplace", List.of(1)), Map.entry("regexp_replace", List.of(1)),
      Map.entry("RegExpCount", List.of(1)), Map.entry("regexp_count", List.of(1)),
      Map.entry("RegExpInStr", List.of(1)), Map.entry("regexp_instr", List.of(1)),
      Map.entry("RegExpSubStr", List.of(1)), Map.entry("regexp_substr", List.of(1)),
      Map.entry("StringSplit", List.of(1)), Map.entry("split", List.of(1)),
      Map.entry("StringToMap", List.of(1, 2)), Map.entry("str_to_map", List.of(1, 2)));
  private static final List<String> LIKES = List.of("Like", "ILike", "like", "ilike");
  private static final List<String> LIKE_LISTS = List.of(
      "LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny");

  private Patterns() {}

  /** Refuses {@code expression} if it matches with a pattern that is not checkable. */
  static void checkExpression(Expression expression) {
    String kind = expression instanceof UnresolvedFunction function
        ? last(CollectionConverters.asJava(function.nameParts()))
        : expression.getClass().getSimpleName();
    List<Expression> args = CollectionConverters.asJava(expression.children());
    List<Integer> positions = REGEX_ARGUMENTS.get(kind);
    if (positions != null) {
      for (int position : positions) {
        if (position < args.size()) {
          checkRegex(expression.prettyName(), args.get(position));
        }
      }
    } else if (LIKES.contains(kind) && args.size() > 1) {
      checkLike(expression.prettyName(), args.get(1));
    } else if (LIKE_LISTS.contains(kind)) {
      try {
        Object patterns = expression.getClass().getMethod("patterns").invoke(expression);
        for (Object pattern : CollectionConverters.asJava((Seq<?>) patterns)) {
          check("LIKE", pattern == null ? null : pattern.toString(), true);
        }
      } catch (ReflectiveOperationException | ClassCastException unknown) {
        throw refusal("LIKE ANY/ALL", "cannot be checked");
      }
    }
  }

  private static String last(List<String> parts) {
    return parts.isEmpty() ? "" : parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
  }

  /** Refuses {@code pattern} (an argument of {@code function}) unless a checkable constant. */
  static void checkRegex(String function, Expression pattern) {
    check(function, constant(function, pattern), false);
  }

  /** Refuses a LIKE pattern unless a constant with few wildcards. */
  static void checkLike(String function, Expression pattern) {
    check(function, constant(function, pattern), true);
  }

  /** Refuses a pattern's text: {@code like} for LIKE's {@code %} and {@code _}. */
  static void check(String function, String pattern, boolean like) {
    if (pattern == null) {
      return; // a null pattern matches nothing
    }
    if (pattern.length() > MAX_CHARS) {
      throw refusal(function, "is longer than " + MAX_CHARS + " characters");
    }
    if (like) {
      long wildcards = pattern.chars().filter(c -> c == '%').count();
      if (wildcards > MAX_UNBOUNDED) {
        throw refusal(function, "has more than " + MAX_UNBOUNDED + " % wildcards");
      }
      return;
    }
    regex(function, pattern);
  }

  private static String constant(String function, Expression pattern) {
    if (!pattern.foldable()) {
      throw refusal(function, "is not a constant (a pattern must be written in the statement, "
          + "so it can be checked)");
    }
    Object value = pattern.eval(null);
    return value == null ? null : value.toString();
  }

  /** One pass over the pattern: groups on a stack, each remembering what it holds. */
  private static void regex(String function, String p) {
    Deque<boolean[]> groups = new ArrayDeque<>(); // {holds a quantifier, holds an alternation}
    boolean[] top = {false, false};
    boolean[] closed = null; // the group that ended just before this character
    int unbounded = 0;
    int i = 0;
    while (i < p.length()) {
      char c = p.charAt(i);
      boolean[] previous = closed;
      closed = null;
      if (c == '\\') {
        char next = i + 1 < p.length() ? p.charAt(i + 1) : ' ';
        if ((next >= '1' && next <= '9') || next == 'k') {
          throw refusal(function, "has a back reference");
        }
        i += 2;
      } else if (c == '[') {
        i = pastClass(p, i);
      } else if (c == '(') {
        if (p.startsWith("(?=", i) || p.startsWith("(?!", i) || p.startsWith("(?<=", i)
            || p.startsWith("(?<!", i)) {
          throw refusal(function, "has a lookaround");
        }
        groups.push(top);
        top = new boolean[] {false, false};
        i++;
      } else if (c == ')') {
        closed = top;
        top = groups.isEmpty() ? new boolean[] {false, false} : groups.pop();
        top[0] |= closed[0];
        top[1] |= closed[1];
        i++;
      } else if (c == '|') {
        top[1] = true;
        i++;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        int end = c == '{' ? p.indexOf('}', i) : i;
        if (c == '{' && end < 0) {
          i++;
          continue;
        }
        String count = c == '{' ? p.substring(i + 1, end) : "";
        boolean open = c == '*' || c == '+' || count.endsWith(",");
        boolean repeats = open || (c == '{' && !count.strip().matches("[01]|0?,1|1,1"));
        if (!count.isEmpty()) {
          for (String bound : count.split(",")) {
            if (!bound.isBlank() && (!bound.strip().matches("\\d{1,4}")
                || Integer.parseInt(bound.strip()) > MAX_COUNT)) {
              throw refusal(function, "counts a repetition above " + MAX_COUNT);
            }
          }
        }
        if (repeats && previous != null && (previous[0] || previous[1])) {
          throw refusal(function, "repeats a group that itself repeats or alternates "
              + "(like (a+)+ or (a|b)*), which can take exponential time");
        }
        if (open && ++unbounded > MAX_UNBOUNDED) {
          throw refusal(function, "has more than " + MAX_UNBOUNDED + " unbounded repetitions "
              + "(*, +, {n,})");
        }
        top[0] = true;
        i = end + 1;
        if (i < p.length() && (p.charAt(i) == '?' || p.charAt(i) == '+')) {
          i++; // lazy or possessive
        }
      } else {
        i++;
      }
    }
  }

  private static int pastClass(String p, int start) {
    int i = start + 1;
    if (i < p.length() && p.charAt(i) == '^') {
      i++;
    }
    if (i < p.length() && p.charAt(i) == ']') {
      i++;
    }
    int depth = 1;
    while (i < p.length() && depth > 0) {
      char c = p.charAt(i);
      if (c == '\\') {
        i += 2;
        continue;
      }
      if (c == '[') {
        depth++;
      } else if (c == ']') {
        depth--;
      }
      i++;
    }
    return i;
  }

  private static Refusal refusal(String function, String why) {
    return Refusal.of("pattern", "the pattern of " + function + " " + why);
  }
}
