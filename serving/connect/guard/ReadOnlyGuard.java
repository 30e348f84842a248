package platform.sql;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.LocalTempView$;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LeafNode;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.OneRowRelation;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.execution.SparkSqlParser;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.Function1;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * The SQL server's read-only rule: a Spark session extension.
 *
 * <p>Every plan an analyst's session analyses is checked; the server's own session (which
 * builds the views) is trusted by {@link #trust}. An analyst may read the catalog's persistent
 * views (their bodies are the server's), literal rows and ranges, and run SHOW, DESCRIBE,
 * EXPLAIN, SET, USE and local temporary views. Refused, with an error naming the rule:
 *
 * <ul>
 *   <li>every other command: writes (INSERT, MERGE, DELETE, CTAS, saves), DDL, caching, jars;
 *   <li>reading anything but those views: paths ({@code parquet.`/x`}, {@code spark.read}),
 *       tables, data sources (Cassandra included);
 *   <li>code from the client: Python and pandas UDFs and functions, Scala UDFs and typed
 *       Dataset functions whose classes the client uploaded, {@code reflect}/{@code java_method},
 *       {@code TRANSFORM} scripts.
 * </ul>
 *
 * <p>Two kinds of plan are not the analyst's own and pass: the body of a persistent view while
 * Spark resolves it, and the queries Delta's code runs over its own transaction log to find the
 * snapshot of a table a view reads.
 *
 * <p>The parser wrapper works around delta-io/delta#7640: Delta's parser does not forward query
 * parameters ({@code spark.sql(q, args)} fails with UNBOUND_SQL_PARAMETER), so a statement with
 * parameters is parsed by Spark's own parser, which binds them; any other goes to Delta's.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {

  private static final Set<Object> TRUSTED = Collections.synchronizedSet(
      Collections.newSetFromMap(new WeakHashMap<>()));

  private static final List<String> ALLOWED_COMMAND_PREFIXES = List.of(
      "Show", "Describe", "Explain", "SetCommand", "ResetCommand", "SetCatalogAndNamespace",
      "SetNamespaceCommand", "RefreshTable");

  private static final List<String> CLIENT_CODE_MARKERS = List.of(
      "Python", "Pandas", "InArrow", "ScriptTransformation");

  /** Trusts the session {@code session} (the server's own): its plans are not checked. */
  public static void trust(Object session) {
    TRUSTED.add(session);
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectCheckRule(session -> plan -> {
      if (!TRUSTED.contains(session) && !resolvingView() && !deltaInternal()) {
        walk(plan);
      }
      return BoxedUnit.UNIT;
    });
    extensions.injectParser((session, delegate) -> new ParameterParser(delegate));
    return BoxedUnit.UNIT;
  }

  private static void walk(LogicalPlan plan) {
    if (plan instanceof View view) {
      if (view.isTempView()) {
        walk(view.child());
      }
      return; // a persistent view's body is the server's
    }
    String name = plan.getClass().getSimpleName();
    if (plan instanceof CreateViewCommand create) {
      if (create.viewType() != LocalTempView$.MODULE$) {
        refuse("only local temporary views may be created (CREATE TEMP VIEW), not " + name);
      }
      return; // its body is checked where the view is read
    }
    if (plan instanceof Command) {
      if (ALLOWED_COMMAND_PREFIXES.stream().noneMatch(name::startsWith)) {
        refuse("the SQL server is read-only: " + name + " is not allowed (only queries, "
            + "SHOW, DESCRIBE, EXPLAIN, SET, USE and temporary views)");
      }
      return;
    }
    for (String marker : CLIENT_CODE_MARKERS) {
      if (name.contains(marker)) {
        refuse("code sent by the client does not run on the SQL server (" + name + ")");
      }
    }
    if (!isServerCode(typedFunction(plan))) {
      refuse("functions sent by the client do not run on the SQL server (" + name + ")");
    }
    if (plan instanceof LeafNode && !allowedLeaf(plan)) {
      refuse("only the platform's views can be read (SHOW VIEWS lists them), not "
          + describe(plan));
    }
    for (Expression expression : list(plan.expressions())) {
      walk(expression);
    }
    for (LogicalPlan child : list(plan.children())) {
      walk(child);
    }
  }

  private static void walk(Expression expression) {
    if (expression instanceof CallMethodViaReflection) {
      refuse("reflect and java_method are not allowed");
    }
    if (expression instanceof ScalaUDF udf && !isServerCode(udf.function().getClass())) {
      refuse("user-defined functions sent by the client do not run on the SQL server");
    }
    String name = expression.getClass().getSimpleName();
    if (name.contains("Python")) {
      refuse("code sent by the client does not run on the SQL server (" + name + ")");
    }
    if (expression instanceof PlanExpression<?> subquery
        && subquery.plan() instanceof LogicalPlan inner) {
      walk(inner);
    }
    for (Expression child : list(expression.children())) {
      walk(child);
    }
  }

  private static boolean allowedLeaf(LogicalPlan leaf) {
    return leaf instanceof LocalRelation || leaf instanceof OneRowRelation || leaf instanceof Range;
  }

  /**
   * Delta's own plans: the snapshot of a table a view reads is computed from its transaction
   * log by queries Delta runs in the reading session, from Delta's code (never the client's).
   */
  private static boolean deltaInternal() {
    return onStack("org.apache.spark.sql.delta.");
  }

  /** Spark analyses a persistent view's stored body while it resolves the view. */
  private static boolean resolvingView() {
    return onStack("org.apache.spark.sql.catalyst.analysis.ViewResolution");
  }

  private static boolean onStack(String classPrefix) {
    return StackWalker.getInstance().walk(frames ->
        frames.anyMatch(frame -> frame.getClassName().startsWith(classPrefix)));
  }

  /** The function of a typed Dataset operation (MapPartitions, MapGroups...), if any. */
  private static Class<?> typedFunction(LogicalPlan plan) {
    try {
      Object function = plan.getClass().getMethod("func").invoke(plan);
      return function == null ? null : function.getClass();
    } catch (ReflectiveOperationException noFunction) {
      return null;
    }
  }

  /** A class loaded by the server (its class path), not from a client's uploaded artifacts. */
  private static boolean isServerCode(Class<?> type) {
    if (type == null) {
      return true;
    }
    ClassLoader loader = type.getClassLoader();
    for (ClassLoader own = ReadOnlyGuard.class.getClassLoader(); own != null;
        own = own.getParent()) {
      if (own == loader) {
        return true;
      }
    }
    return loader == null;
  }

  private static String describe(LogicalPlan leaf) {
    String text = leaf.simpleString(200);
    return text.length() > 200 ? text.substring(0, 200) + "..." : text;
  }

  private static void refuse(String message) {
    throw new ReadOnlyViolation("Refused by the SQL server: " + message + ".");
  }

  private static <T> List<T> list(Seq<T> seq) {
    return CollectionConverters.asJava(seq);
  }

  /** The error an analyst sees, its message naming the rule (Spark Connect passes it on). */
  static final class ReadOnlyViolation extends RuntimeException {
    ReadOnlyViolation(String message) {
      super(message);
    }
  }

  /** Delegates to Delta's parser, but parses statements with parameters with Spark's own. */
  static final class ParameterParser implements ParserInterface {
    private final ParserInterface delegate;
    private final SparkSqlParser spark = new SparkSqlParser();

    ParameterParser(ParserInterface delegate) {
      this.delegate = delegate;
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sql, ParameterContext parameters)
        throws ParseException {
      return hasParameters(parameters)
          ? spark.parsePlanWithParameters(sql, parameters)
          : delegate.parsePlanWithParameters(sql, parameters);
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

    @Override
    public LogicalPlan parsePlan(String sql) throws ParseException {
      return delegate.parsePlan(sql);
    }

    @Override
    public Expression parseExpression(String sql) throws ParseException {
      return delegate.parseExpression(sql);
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
      return delegate.parseTableIdentifier(sql);
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
      return delegate.parseFunctionIdentifier(sql);
    }

    @Override
    public Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
      return delegate.parseMultipartIdentifier(sql);
    }

    @Override
    public LogicalPlan parseQuery(String sql) throws ParseException {
      return delegate.parseQuery(sql);
    }

    @Override
    public StructType parseRoutineParam(String sql) throws ParseException {
      return delegate.parseRoutineParam(sql);
    }

    @Override
    public StructType parseTableSchema(String sql) throws ParseException {
      return delegate.parseTableSchema(sql);
    }

    @Override
    public DataType parseDataType(String sql) throws ParseException {
      return delegate.parseDataType(sql);
    }
  }
}
