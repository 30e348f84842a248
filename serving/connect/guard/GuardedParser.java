package platform.sql;

import java.lang.reflect.Method;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.analysis.UnresolvedGenerator;
import org.apache.spark.sql.catalyst.analysis.UnresolvedInlineTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableValuedFunction;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.QueryPlan;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkSqlParser;
import org.apache.spark.sql.execution.command.ExplainCommand;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The parser of an analyst's session: checks the text, then what it names, before Spark
 * resolves anything.
 *
 * <ul>
 *   <li>Every text (statement, expression, type) is refused when longer or more deeply nested
 *       than the server's limits ({@link SqlText}).
 *   <li>A statement may name relations only as the catalog's views are named
 *       ({@link Policy#relationName}): a path, a data source ({@code delta.`/lake/...`},
 *       {@code jdbc.`...`}) or another catalog is refused here, so it is never resolved
 *       (resolving would open it, or tell whether it exists). Namespaces likewise; also
 *       refused: {@code IDENTIFIER(...)} names (resolved later), SQL scripts, and
 *       {@code reflect}, {@code java_method}, {@code try_reflect}.
 * </ul>
 *
 * <p>The server's own (trusted) session parses freely: its views name the lake's paths.
 *
 * <p>It also works around delta-io/delta#7640: Delta's parser does not forward query
 * parameters ({@code spark.sql(q, args)} fails with UNBOUND_SQL_PARAMETER), so a statement
 * with parameters is parsed by Spark's own parser, which binds them; any other goes to
 * Delta's.
 */
final class GuardedParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface delegate;
  private final SparkSqlParser spark = new SparkSqlParser();

  GuardedParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  private boolean guarded() {
    return !ReadOnlyGuard.isTrusted(session);
  }

  private void text(String sql) {
    if (guarded()) {
      Policy policy = Policy.get();
      SqlText.check(sql, policy.maxChars, policy.maxDepth);
    }
  }

  private LogicalPlan statement(LogicalPlan plan) {
    if (guarded()) {
      walk(plan);
    }
    return plan;
  }

  /** A parse that may throw Spark's {@link ParseException}. */
  @FunctionalInterface
  private interface Parse<T> {
    T run() throws ParseException;
  }

  /**
   * {@code parse} of {@code sql} within the limits: the text checked first, and a statement
   * too complex for the parser's stack refused with the limit's reason (Spark would answer an
   * error with no message).
   */
  private <T> T parse(String sql, Parse<T> parse) throws ParseException {
    text(sql);
    try {
      return parse.run();
    } catch (StackOverflowError tooDeep) {
      throw Refusal.of("statement_depth", "the statement is nested too deeply to parse "
          + "(operators, NOT or CASE inside one another); split it with WITH clauses");
    }
  }

  @Override
  public LogicalPlan parsePlanWithParameters(String sql, ParameterContext parameters)
      throws ParseException {
    return statement(parse(sql, () -> hasParameters(parameters)
        ? spark.parsePlanWithParameters(sql, parameters)
        : delegate.parsePlanWithParameters(sql, parameters)));
  }

  @Override
  public LogicalPlan parsePlan(String sql) throws ParseException {
    return statement(parse(sql, () -> delegate.parsePlan(sql)));
  }

  @Override
  public LogicalPlan parseQuery(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseQuery(sql));
  }

  @Override
  public Expression parseExpression(String sql) throws ParseException {
    Expression expression = parse(sql, () -> delegate.parseExpression(sql));
    if (guarded()) {
      walk(expression);
    }
    return expression;
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseTableIdentifier(sql));
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseFunctionIdentifier(sql));
  }

  @Override
  public Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseMultipartIdentifier(sql));
  }

  @Override
  public StructType parseRoutineParam(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseRoutineParam(sql));
  }

  @Override
  public StructType parseTableSchema(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseTableSchema(sql));
  }

  @Override
  public DataType parseDataType(String sql) throws ParseException {
    return parse(sql, () -> delegate.parseDataType(sql));
  }

  /** Spark passes a context on every statement; only a non-empty one binds anything. */
  private static boolean hasParameters(ParameterContext parameters) {
    try {
      Object values = parameters.getClass().getMethod("params").invoke(parameters);
      return !(values instanceof scala.collection.Iterable<?> iterable) || !iterable.isEmpty();
    } catch (ReflectiveOperationException unknownContext) {
      return true;
    }
  }

  // --- what a parsed statement names ---------------------------------------------------------

  static void walk(LogicalPlan plan) {
    String name = plan.getClass().getSimpleName();
    if (name.contains("PathBased") || name.contains("PathOr")
        || plan.getClass().getName().startsWith("org.apache.spark.sql.delta.")) {
      throw Refusal.of("metadata", "Delta's commands and paths are not available to analysts: "
          + "read the catalog's views by name (SHOW VIEWS lists them; DESCRIBE <view> shows "
          + "its columns)");
    }
    if (name.equals("PlanWithUnresolvedIdentifier")) {
      throw Refusal.of("read", "IDENTIFIER(...) names are not accepted; name the view itself");
    }
    if (plan instanceof UnresolvedTableValuedFunction function) {
      Functions.get().checkTableFunction(list(function.name()));
    }
    if (plan instanceof UnresolvedInlineTable table) {
      Sizes.checkRows(table.rows(), Policy.get().maxValueBytes);
      for (Seq<Expression> row : list(table.rows())) {
        for (Expression value : list(row)) {
          walk(value);
          patterns(value);
        }
      }
    }
    if (name.startsWith("Compound") || name.startsWith("SingleStatement")) {
      throw Refusal.of("write", "SQL scripts (BEGIN ... END) are not run on the SQL server");
    }
    List<String> parts = nameParts(plan, "multipartIdentifier");
    if (parts != null && name.equals("UnresolvedFunctionName")) { // DESCRIBE FUNCTION f
      Functions.get().checkName(parts);
    } else if (parts != null && name.startsWith("Unresolved")) {
      boolean ok = name.equals("UnresolvedNamespace")
          ? Policy.namespace(parts) : Policy.relationName(parts);
      if (!ok) {
        String named = String.join(".", parts);
        throw Refusal.of("read", "only the catalog's views can be named (SHOW VIEWS lists "
            + "them), not " + (named.matches("[A-Za-z0-9_.]*") ? named : "a path") + " (no "
            + "paths, data sources or other catalogs)");
      }
    }
    if (plan instanceof ExplainCommand explain) {
      walk(explain.logicalPlan());
    }
    for (Expression expression : list(plan.expressions())) {
      walk(expression);
    }
    for (QueryPlan<?> inner : list(plan.innerChildren())) {
      if (inner instanceof LogicalPlan logical) {
        walk(logical);
      }
    }
    for (LogicalPlan child : list(plan.children())) {
      walk(child);
    }
  }

  static void walk(Expression expression) {
    if (expression instanceof UnresolvedFunction function) {
      Functions.get().checkName(list(function.nameParts()));
    } else if (expression instanceof UnresolvedGenerator generator) {
      Functions.get().checkName(List.of(generator.name().funcName()));
    }
    if (expression instanceof PlanExpression<?> subquery
        && subquery.plan() instanceof LogicalPlan inner) {
      walk(inner);
    }
    for (Expression child : list(expression.children())) {
      walk(child);
    }
  }

  private static void patterns(Expression expression) {
    Patterns.checkExpression(expression);
    for (Expression child : list(expression.children())) {
      patterns(child);
    }
  }

  /** {@code plan.<method>()} as a list of strings, or null when it has no such method. */
  private static List<String> nameParts(LogicalPlan plan, String method) {
    try {
      Method getter = plan.getClass().getMethod(method);
      if (getter.invoke(plan) instanceof Seq<?> seq) {
        return CollectionConverters.asJava(seq).stream().map(String::valueOf).toList();
      }
    } catch (ReflectiveOperationException none) {
      // not a named relation or namespace
    }
    return null;
  }

  private static <T> List<T> list(Seq<T> seq) {
    return CollectionConverters.asJava(seq);
  }
}
