package platform.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedPersistentView;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ShowTables;
import org.apache.spark.sql.catalyst.plans.logical.ShowViews;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.util.StringUtils;
import org.apache.spark.sql.connect.service.SessionHolderInfo;
import org.apache.spark.sql.connect.service.SparkConnectService$;
import org.apache.spark.sql.execution.command.ShowTablesCommand;
import org.apache.spark.sql.execution.command.ShowViewsCommand;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The catalog an analyst's session sees: its identity's grants ({@link Identity#granted}, the
 * views of the pipelines its teams may read, from the declarations), an allow-list.
 *
 * <ul>
 *   <li>Every name a plan reads or describes is decided before Spark resolves it ({@link
 *       NameRule}, in the analyser's hint batch, which runs before relations are resolved): a
 *       granted view, or a temporary view of the session; any other name, of a view that
 *       exists or not, is refused alike: "<view> is not granted to <identity>".
 *   <li>Once analysed, every persistent view in the plan must be granted too ({@link
 *       #checkView}, from the check rule), and is recorded as read for the audit.
 *   <li>{@code SHOW VIEWS}, {@code SHOW TABLES} and {@code spark.catalog.listTables()} list the
 *       granted views and the session's temporary ones ({@link #visible}).
 * </ul>
 *
 * <p>Who asks is the {@link Call} the protocol bound: the identity its credential proved,
 * which must be the user the session belongs to (a session's user id is the identity's name,
 * set by {@link ProtocolGuard}), or nothing is read.
 */
final class Grants {
  private static final Map<String, String> USER_OF_SESSION = new ConcurrentHashMap<>();
  /** Names a listing's pattern can carry as they are (no character Spark's patterns read). */
  private static final Pattern PLAIN = Pattern.compile("[A-Za-z0-9_]+");
  private static final String NONE = "-";

  private Grants() {}

  /** The refusal for {@code name}: the same words whether such a view exists or not. */
  static Refusal notGranted(String name, Identity who) {
    return Refusal.of("not_granted", name.toLowerCase(Locale.ROOT) + " is not granted to "
        + who.name());
  }

  /** The identity of the call analysing in {@code session}, bound to that session's user. */
  static Identity caller(SparkSession session) {
    Call call = Call.current();
    if (call == null) {
      throw Refusal.of("identity", "this request carries no identity the server proved");
    }
    if (!call.identity.name().equals(userOf(session))) {
      throw Refusal.of("identity", "this session is not one of " + call.identity.name());
    }
    return call.identity;
  }

  /** The Spark Connect user id of {@code session} (null when it is no Connect session). */
  private static String userOf(SparkSession session) {
    String uuid = ((org.apache.spark.sql.classic.SparkSession) session).sessionUUID();
    String user = USER_OF_SESSION.get(uuid);
    if (user == null) {
      for (SessionHolderInfo info : CollectionConverters.asJava(
          SparkConnectService$.MODULE$.sessionManager().listActiveSessions())) {
        USER_OF_SESSION.putIfAbsent(info.serverSessionId(), info.userId());
      }
      user = USER_OF_SESSION.get(uuid);
      if (USER_OF_SESSION.size() > 100_000) {
        USER_OF_SESSION.clear(); // sessions long gone; those alive are found again
      }
    }
    return user;
  }

  /** A persistent view of the analysed plan: granted, else refused; recorded as read. */
  static void checkView(SparkSession session, View view) {
    long began = System.nanoTime();
    String name = view.desc().identifier().table();
    Identity who = caller(session);
    if (!who.grants(name.toLowerCase(Locale.ROOT))) {
      throw notGranted(name, who);
    }
    Call.current().read(name);
    SqlMetrics.access("grants", began);
  }

  /** A view named by a command ({@code DESCRIBE}, {@code SHOW COLUMNS}): granted or temporary. */
  static void checkName(SparkSession session, TableIdentifier table) {
    if (table.database().isEmpty() && isTempView(session, List.of(table.table()))) {
      return;
    }
    Identity who = caller(session);
    if (!who.grants(table.table().toLowerCase(Locale.ROOT))) {
      throw notGranted(table.table(), who);
    }
  }

  private static boolean isTempView(SparkSession session, List<String> parts) {
    return parts.size() == 1
        && ((org.apache.spark.sql.classic.SparkSession) session).sessionState().catalog()
            .isTempView(CollectionConverters.asScala(parts).toList());
  }

  /**
   * {@code SHOW VIEWS} and {@code SHOW TABLES} (and the catalog API's listTables, which runs
   * SHOW TABLES) limited to what {@code session}'s identity may see: its granted views and its
   * temporary ones. The listing keeps its kind (the catalog API looks for it, and reads its
   * rows as they are made); its pattern becomes the names it may show that match the one
   * asked for.
   */
  static LogicalPlan visible(SparkSession session, LogicalPlan plan) {
    if (plan instanceof ShowViewsCommand show) {
      return new ShowViewsCommand(show.databaseName(),
          shown(session, show.tableIdentifierPattern()), show.output());
    }
    if (plan instanceof ShowTablesCommand show) {
      return new ShowTablesCommand(show.databaseName(),
          shown(session, show.tableIdentifierPattern()), show.output(), show.isExtended(),
          show.partitionSpec());
    }
    if (plan instanceof ShowTables show) {
      return new ShowTables(show.namespace(), shown(session, show.pattern()), show.output());
    }
    if (plan instanceof ShowViews show) {
      return new ShowViews(show.namespace(), shown(session, show.pattern()), show.output());
    }
    return plan;
  }

  /** The pattern that lists exactly the names {@code session} may see among those
   * {@code asked} matches (Spark's patterns: {@code *} and {@code |}, case-insensitive). */
  private static Option<String> shown(SparkSession session, Option<String> asked) {
    Set<String> names = new TreeSet<>(caller(session).granted());
    for (TableIdentifier temporary : CollectionConverters.asJava(
        ((org.apache.spark.sql.classic.SparkSession) session).sessionState().catalog()
            .listLocalTempViews("*"))) {
      names.add(temporary.table());
    }
    names.removeIf(name -> !PLAIN.matcher(name).matches());
    List<String> kept = new ArrayList<>(names);
    if (asked.isDefined()) {
      kept = CollectionConverters.asJava(StringUtils.filterPattern(
          CollectionConverters.asScala(kept).toList(), asked.get()));
    }
    // A name no view has (views are named as identifiers) lists nothing.
    return Option.apply(kept.isEmpty() ? NONE : String.join("|", kept));
  }

  /**
   * Refuses, before any is resolved, every name a plan reads or describes that is neither a
   * granted view nor a temporary view of the session (a CTE's name is substituted earlier).
   * Run in the analyser's hint batch, before relation resolution: a name is refused the same
   * way whether a view of that name exists or not, and nothing is looked up for it.
   */
  static final class NameRule extends Rule<LogicalPlan> {
    private final SparkSession session;

    NameRule(SparkSession session) {
      this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      List<List<String>> names = new ArrayList<>();
      collect(plan, names);
      if (names.isEmpty() || ReadOnlyGuard.isTrusted(session) || ReadOnlyGuard.resolvingView()
          || ReadOnlyGuard.deltaInternal()) {
        return plan;
      }
      long began = System.nanoTime();
      Identity who = caller(session);
      for (List<String> parts : names) {
        String last = parts.get(parts.size() - 1);
        boolean ok = isTempView(session, parts)
            || (Policy.relationName(parts) && !parts.get(0).equalsIgnoreCase("global_temp")
                && (parts.size() < 3 || !parts.get(1).equalsIgnoreCase("global_temp"))
                && who.grants(last.toLowerCase(Locale.ROOT)));
        if (!ok) {
          throw notGranted(last, who);
        }
      }
      SqlMetrics.access("grants", began);
      return plan;
    }

    @Override
    public String ruleName() {
      return "platform.sql.Grants.NameRule";
    }

    /** The multi-part names of the unresolved relations, tables and views in {@code plan}. */
    private static void collect(LogicalPlan plan, List<List<String>> names) {
      String kind = plan.getClass().getSimpleName();
      if (kind.equals("UnresolvedRelation") || kind.equals("UnresolvedTableOrView")
          || kind.equals("UnresolvedView") || kind.equals("UnresolvedTable")) {
        Object parts = ReadOnlyGuard.call(plan, "multipartIdentifier");
        if (parts instanceof Seq<?> seq) {
          names.add(CollectionConverters.asJava(seq).stream().map(String::valueOf).toList());
        }
      }
      if (plan instanceof ResolvedPersistentView view) {
        names.add(List.of(view.identifier().name()));
      }
      for (Expression expression : CollectionConverters.asJava(plan.expressions())) {
        collect(expression, names);
      }
      for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
        collect(child, names);
      }
    }

    private static void collect(Expression expression, List<List<String>> names) {
      if (expression instanceof PlanExpression<?> subquery
          && subquery.plan() instanceof LogicalPlan inner) {
        collect(inner, names);
      }
      for (Expression child : CollectionConverters.asJava(expression.children())) {
        collect(child, names);
      }
    }
  }
}
