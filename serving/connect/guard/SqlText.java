package platform.sql;

/**
 * The size and nesting limits of one SQL text, checked before Spark's parser sees it.
 *
 * <p>Spark's parser needs memory and time that grow steeply with nesting: a
 * {@code SELECT ((((1))))} nested 20,000 deep ran for minutes and exhausted a 1 GB driver.
 * Counting parentheses is linear and needs no memory, so a text nested deeper than the limit
 * is refused in microseconds. Parentheses inside string literals ({@code '...'},
 * {@code "..."}, raw {@code r'...'}), quoted identifiers ({@code `...`}) and comments
 * ({@code -- ...}, nested {@code /* ... *}{@code /}) do not count, as Spark's lexer reads them.
 * The same rule is in {@code serving/sql_http.py} ({@code nesting_depth}).
 */
final class SqlText {
  private SqlText() {}

  /** Refuses {@code sql} when longer than {@code maxChars} or nested deeper than {@code maxDepth}. */
  static void check(String sql, int maxChars, int maxDepth) {
    if (sql == null) {
      return;
    }
    if (sql.length() > maxChars) {
      throw Refusal.of("statement_size", "the statement has " + sql.length()
          + " characters, more than the SQL server's limit of " + maxChars
          + " (sql.max_statement_chars); send a shorter statement");
    }
    int depth = depth(sql, maxDepth);
    if (depth > maxDepth) {
      throw Refusal.of("statement_depth", "the statement nests parentheses deeper than the SQL "
          + "server's limit of " + maxDepth + " (sql.max_statement_depth); use WITH clauses "
          + "or temporary views instead of deep nesting");
    }
  }

  /** The deepest parenthesis nesting of {@code sql}, counting stops past {@code stopAbove}. */
  static int depth(String sql, int stopAbove) {
    int depth = 0;
    int deepest = 0;
    int n = sql.length();
    int i = 0;
    while (i < n) {
      char c = sql.charAt(i);
      if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
        int end = sql.indexOf('\n', i);
        i = end < 0 ? n : end + 1;
      } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
        i = skipComment(sql, i);
      } else if (c == '\'' || c == '"') {
        i = skipString(sql, i, c, isRaw(sql, i));
      } else if (c == '`') {
        int end = sql.indexOf('`', i + 1);
        i = end < 0 ? n : end + 1;
      } else {
        if (c == '(') {
          depth++;
          if (depth > deepest) {
            deepest = depth;
            if (deepest > stopAbove) {
              return deepest;
            }
          }
        } else if (c == ')' && depth > 0) {
          depth--;
        }
        i++;
      }
    }
    return deepest;
  }

  /** A quote right after a lone {@code r}/{@code R} starts a raw string (no escapes). */
  private static boolean isRaw(String sql, int quote) {
    if (quote == 0 || Character.toLowerCase(sql.charAt(quote - 1)) != 'r') {
      return false;
    }
    return quote < 2 || !isIdentifierChar(sql.charAt(quote - 2));
  }

  private static boolean isIdentifierChar(char c) {
    return Character.isLetterOrDigit(c) || c == '_';
  }

  private static int skipString(String sql, int start, char quote, boolean raw) {
    int i = start + 1;
    while (i < sql.length()) {
      char c = sql.charAt(i);
      if (c == '\\' && !raw) {
        i += 2;
      } else if (c == quote) {
        return i + 1;
      } else {
        i++;
      }
    }
    return sql.length();
  }

  /** Past a bracketed comment; Spark's comments nest. */
  private static int skipComment(String sql, int start) {
    int level = 0;
    int i = start;
    while (i < sql.length()) {
      if (sql.startsWith("/*", i)) {
        level++;
        i += 2;
      } else if (sql.startsWith("*/", i)) {
        level--;
        i += 2;
        if (level == 0) {
          return i;
        }
      } else {
        i++;
      }
    }
    return sql.length();
  }
}
