package platform.sql;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.LocalTempView$;
import org.apache.spark.sql.catalyst.catalog.CatalogTableType;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LeafNode;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.OneRowRelation;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.logical.RebalancePartitions;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.command.CreateViewCommand;
import org.apache.spark.sql.execution.command.ResetCommand;
import org.apache.spark.sql.execution.command.SetCommand;

import scala.Function1;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * The SQL server's read-only rule: a Spark session extension.
 *
 * <p>Every plan an analyst's session analyses is checked; the server's own session (which
 * builds the views) is trusted by {@link #trust}. An analyst may read the catalog's persistent
 * views its identity is granted ({@link Grants}, whose name rule runs in the analyser's hint
 * batch, before relations are resolved; their bodies are the server's), literal rows and
 * ranges, and run DESCRIBE and SHOW on
 * the views, EXPLAIN, USE of the default namespace, SET of the allow-listed settings
 * ({@link Policy}) and local temporary views. Refused, with an error naming the rule:
 *
 * <ul>
 *   <li>every other command: writes (INSERT, MERGE, DELETE, CTAS, saves), DDL, caching, jars,
 *       Delta's commands (DESCRIBE HISTORY/DETAIL), SHOW CREATE TABLE and the EXTENDED forms
 *       of DESCRIBE and SHOW (they show the views' bodies, which name the lake's paths);
 *   <li>reading anything but those views: paths, tables, data sources (Cassandra, JDBC);
 *   <li>code from the client: Python and pandas UDFs and functions, Scala UDFs and typed
 *       Dataset functions whose classes the client uploaded, {@code reflect}/{@code java_method},
 *       {@code TRANSFORM} scripts.
 * </ul>
 *
 * <p>Every expression must be of a class the analysts' functions make ({@link Functions}); a
 * statement's values and rows are bounded ({@link Sizes}), its patterns checkable
 * ({@link Patterns}); SHOW FUNCTIONS and EXPLAIN are answered by {@link AnalystCommands}.
 *
 * <p>Names, sizes and nesting are checked earlier, when the text is parsed
 * ({@link GuardedParser}), and what the protocol carries before that ({@link ProtocolGuard}).
 *
 * <p>Two kinds of plan are not the analyst's own and pass: the body of a persistent view while
 * Spark resolves it, and the queries Delta's code runs over its own transaction log to find the
 * snapshot of a table a view reads.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {

  private static final Set<Object> TRUSTED = Collections.synchronizedSet(
      Collections.newSetFromMap(new WeakHashMap<>()));

  /** DESCRIBE and SHOW commands (their logical and session-catalog forms) on the views. */
  private static final Set<String> METADATA = Set.of(
      "ShowViews", "ShowViewsCommand", "ShowTables", "ShowTablesCommand", "ShowColumns",
      "ShowColumnsCommand", "ShowFunctions", "ShowFunctionsCommand", "ShowNamespaces",
      "ShowNamespacesCommand", "ShowCatalogs", "ShowCatalogsCommand", "ShowCurrentNamespace",
      "ShowCurrentNamespaceCommand", "DescribeRelation", "DescribeTableCommand",
      "DescribeColumn", "DescribeColumnCommand", "DescribeFunction", "DescribeFunctionCommand",
      "ExplainCommand", "RefreshTable", "RefreshTableCommand");

  /** USE: its namespace is checked when the statement is parsed. */
  private static final Set<String> NAMESPACE = Set.of(
      "SetCatalogAndNamespace", "SetNamespaceCommand", "SetCatalogCommand");

  /** The metadata key of a file source's hidden columns ({@code _metadata.file_path} ...). */
  private static final String METADATA_COLUMN = "__metadata_col";

  private static final List<String> CLIENT_CODE_MARKERS = List.of(
      "Python", "Pandas", "InArrow", "ScriptTransformation");

  private static volatile boolean started;

  /** Trusts the session {@code session} (the server's own): its plans are not checked. From
   * then on the server takes analysts' calls ({@link #started}). */
  public static void trust(Object session) {
    TRUSTED.add(session);
    started = true;
  }

  /** Whether the server's own session exists (and is Spark's default one), so an analyst's
   * session is cut from it; before, {@link ProtocolGuard} answers UNAVAILABLE. */
  static boolean started() {
    return started;
  }

  static boolean isTrusted(Object session) {
    return TRUSTED.contains(session);
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectHintResolutionRule(session -> new Grants.NameRule(session));
    extensions.injectPostHocResolutionRule(session -> new AnalystRule(session));
    extensions.injectCheckRule(session -> plan -> {
      if (!isTrusted(session) && !resolvingView() && !deltaInternal()) {
        walk(session, plan);
        if (!(plan instanceof Command)) {
          Sizes.checkPlan(plan, Policy.get().maxValueBytes);
        }
      }
      return BoxedUnit.UNIT;
    });
    extensions.injectParser(GuardedParser::new);
    extensions.injectPlannerStrategy(session -> new InterruptibleRange());
    return BoxedUnit.UNIT;
  }

  private static void walk(SparkSession session, LogicalPlan plan) {
    if (plan instanceof View view) {
      if (view.isTempView()) {
        walk(session, view.child());
      } else {
        Grants.checkView(session, view); // granted, and recorded as read
      }
      return; // a persistent view's body is the server's
    }
    String name = plan.getClass().getSimpleName();
    if (plan instanceof CreateViewCommand create) {
      if (create.viewType() != LocalTempView$.MODULE$) {
        throw Refusal.of("write", "only local temporary views may be created (CREATE TEMP "
            + "VIEW), not " + name);
      }
      return; // its body is checked where the view is read
    }
    if (plan instanceof Command) {
      command(session, plan, name);
      return;
    }
    for (String marker : CLIENT_CODE_MARKERS) {
      if (name.contains(marker)) {
        throw Refusal.of("client_code", "code sent by the client does not run on the SQL "
            + "server (" + name + ")");
      }
    }
    if (!isServerCode(typedFunction(plan))) {
      throw Refusal.of("client_code", "functions sent by the client do not run on the SQL "
          + "server (" + name + ")");
    }
    if (plan instanceof LeafNode && !allowedLeaf(plan)) {
      throw Refusal.of("read", "only the platform's views can be read (SHOW VIEWS lists them), "
          + "not " + describe(plan));
    }
    partitions(plan);
    for (Expression expression : list(plan.expressions())) {
      walk(session, expression);
    }
    for (LogicalPlan child : list(plan.children())) {
      walk(session, child);
    }
  }

  /**
   * Refuses a partition count the analyst asked for ({@code range}'s fourth argument,
   * {@code REPARTITION}/{@code COALESCE}/{@code REBALANCE} hints, {@code repartition()}) over
   * {@code sql.max_partitions}. Spark gives a job every free slot and takes none back: a stage
   * of 20,000 tasks kept the driver's scheduler busy and others' jobs waited seconds for a slot.
   * Below the server's slots, a statement always leaves one to the other sessions.
   */
  private static void partitions(LogicalPlan plan) {
    Option<Object> asked = Option.empty();
    if (plan instanceof Range range) {
      asked = range.numSlices();
    } else if (plan instanceof Repartition repartition) {
      asked = Option.apply(repartition.numPartitions());
    } else if (plan instanceof RepartitionByExpression repartition) {
      asked = repartition.optNumPartitions();
    } else if (plan instanceof RebalancePartitions rebalance) {
      asked = rebalance.optNumPartitions();
    }
    int most = Policy.get().maxPartitions;
    if (asked.isDefined() && ((Number) asked.get()).intValue() > most) {
      throw Refusal.of("partitions", "a statement may ask for at most " + most + " partitions "
          + "(sql.max_partitions), not " + asked.get() + ": the server's task slots are shared "
          + "by every session");
    }
  }

  private static void command(SparkSession session, LogicalPlan plan, String name) {
    if (plan instanceof SetCommand set) {
      set(set.kv());
    } else if (plan instanceof ResetCommand reset) {
      Option<String> key = reset.config();
      if (key.isDefined()) {
        Policy.get().checkSettable(key.get());
      }
    } else if (METADATA.contains(name)) {
      metadata(session, plan, name);
    } else if (!NAMESPACE.contains(name)) {
      if (name.contains("Cache")) {
        throw Refusal.of("cache", "caching is not available on the SQL server (" + name
            + "): a cache is held in the server's memory and shared by every session");
      }
      if (name.startsWith("ShowCreateTable") || name.startsWith("Describe")
          || name.startsWith("Show")) {
        throw Refusal.of("metadata", name + " is not available: DESCRIBE <view> and SHOW "
            + "VIEWS/COLUMNS/FUNCTIONS describe the catalog; a view's definition is the "
            + "server's");
      }
      throw Refusal.of("write", "the SQL server is read-only: " + name + " is not allowed "
          + "(only queries, DESCRIBE, SHOW, EXPLAIN, SET of a few settings, USE and temporary "
          + "views)");
    }
  }

  /** SET key=value only for the allow-listed settings; SET key only for readable ones. */
  private static void set(Option<Tuple2<String, Option<String>>> kv) {
    if (kv.isEmpty()) {
      throw Refusal.of("setting", "SET without a setting would list the server's settings; "
          + "ask for one (SET spark.sql.session.timeZone)");
    }
    String key = kv.get()._1();
    if (kv.get()._2().isDefined()) {
      Policy.get().checkSettable(key);
    } else {
      Policy.checkReadable(key);
    }
  }

  /** DESCRIBE and SHOW of the views' names and columns, never of their definitions. */
  private static void metadata(SparkSession session, LogicalPlan plan, String name) {
    if (call(plan, "info") instanceof ExpressionInfo function) {
      Functions.get().checkName(List.of(function.getName())); // its usage and examples
      return;
    }
    if (Boolean.TRUE.equals(call(plan, "isExtended"))) {
      throw Refusal.of("metadata", "the EXTENDED forms of DESCRIBE and SHOW show the views' "
          + "definitions, which are the server's; DESCRIBE <view> shows its columns");
    }
    for (String accessor : List.of("table", "tableName")) {
      if (call(plan, accessor) instanceof TableIdentifier table) {
        Grants.checkName(session, table);
        if (!isView(session, table)) {
          throw Refusal.of("metadata", name + " works on the catalog's views only, not on "
              + table.unquotedString());
        }
      }
    }
    for (LogicalPlan child : list(plan.children())) {
      String kind = child.getClass().getSimpleName();
      if (kind.startsWith("Resolved") && !kind.contains("View") && !kind.contains("Namespace")
          && !kind.contains("Func")) {
        throw Refusal.of("metadata", name + " works on the catalog's views only (" + kind
            + ")");
      }
    }
  }

  private static boolean isView(SparkSession session, TableIdentifier table) {
    SessionCatalog catalog =
        ((org.apache.spark.sql.classic.SparkSession) session).sessionState().catalog();
    try {
      return catalog.getTempViewOrPermanentTableMetadata(table).tableType()
          == CatalogTableType.VIEW();
    } catch (Exception missing) { // no such view (or table)
      return false;
    }
  }

  static Object call(Object target, String method) {
    try {
      return target.getClass().getMethod(method).invoke(target);
    } catch (ReflectiveOperationException none) {
      return null;
    }
  }

  private static void walk(SparkSession session, Expression expression) {
    if (expression instanceof CallMethodViaReflection) {
      throw Refusal.of("client_code", "reflect and java_method are not allowed");
    }
    if (expression instanceof ScalaUDF udf && !isServerCode(udf.function().getClass())) {
      throw Refusal.of("client_code", "user-defined functions sent by the client do not run "
          + "on the SQL server");
    }
    String name = expression.getClass().getSimpleName();
    if (name.contains("Python")) {
      throw Refusal.of("client_code", "code sent by the client does not run on the SQL "
          + "server (" + name + ")");
    }
    if (expression instanceof AttributeReference column
        && column.metadata().contains(METADATA_COLUMN)) {
      throw Refusal.of("metadata", column.name() + " is not available: the files behind the "
          + "views are the server's");
    }
    Functions.get().checkClass(expression);
    Patterns.checkExpression(expression);
    if (expression instanceof PlanExpression<?> subquery
        && subquery.plan() instanceof LogicalPlan inner) {
      walk(session, inner);
    }
    for (Expression child : list(expression.children())) {
      walk(session, child);
    }
  }

  /** Literal rows, ranges, and the catalog API's references to views (no data). */
  private static boolean allowedLeaf(LogicalPlan leaf) {
    String name = leaf.getClass().getSimpleName();
    return leaf instanceof LocalRelation || leaf instanceof OneRowRelation || leaf instanceof Range
        || name.equals("ResolvedPersistentView") || name.equals("ResolvedTempView")
        || name.equals("ResolvedNamespace") || name.equals("ResolvedNonPersistentFunc");
  }

  /**
   * Delta's own plans: the snapshot of a table a view reads is computed from its transaction
   * log by queries Delta runs in the reading session, from Delta's code (never the client's).
   */
  static boolean deltaInternal() {
    return onStack("org.apache.spark.sql.delta.");
  }

  /** Spark analyses a persistent view's stored body while it resolves the view. */
  static boolean resolvingView() {
    return onStack("org.apache.spark.sql.catalyst.analysis.ViewResolution");
  }

  private static boolean onStack(String classPrefix) {
    return StackWalker.getInstance().walk(frames ->
        frames.anyMatch(frame -> frame.getClassName().startsWith(classPrefix)));
  }

  /** The function of a typed Dataset operation (MapPartitions, MapGroups...), if any. */
  private static Class<?> typedFunction(LogicalPlan plan) {
    Object function = call(plan, "func");
    return function == null ? null : function.getClass();
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

  private static <T> List<T> list(Seq<T> seq) {
    return CollectionConverters.asJava(seq);
  }

  /** The analyst's SHOW FUNCTIONS and EXPLAIN, answered by {@link AnalystCommands}. */
  private static final class AnalystRule extends Rule<LogicalPlan> {
    private final SparkSession session;

    AnalystRule(SparkSession session) {
      this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      if (isTrusted(session) || resolvingView() || deltaInternal()) {
        return plan;
      }
      return AnalystCommands.rewrite(session, plan);
    }
  }
}
