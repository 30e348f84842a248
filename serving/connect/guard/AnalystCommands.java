package platform.sql;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.util.StringUtils;
import org.apache.spark.sql.execution.SimpleMode$;
import org.apache.spark.sql.execution.command.ExplainCommand;
import org.apache.spark.sql.execution.command.ShowFunctionsCommand;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Three of an analyst's commands answered by the guard instead of Spark, as a rule run after
 * resolution ({@code injectPostHocResolutionRule}):
 *
 * <ul>
 *   <li>{@code SHOW VIEWS} and {@code SHOW TABLES} list the views the identity is granted and
 *       the session's temporary ones ({@link Grants#visible});
 *   <li>{@code SHOW FUNCTIONS [LIKE p]} lists the analysts' functions ({@link Functions}), not
 *       every function the server's Spark has;
 *   <li>{@code EXPLAIN <query>} shows the analyst's own query, analysed, over the catalog's
 *       views by name: no view's body, no path of the lake, no column a view hides. Spark's
 *       {@code EXPLAIN} shows the physical plan, whose scans name the lake's files and read
 *       every column; {@code EXTENDED}, {@code CODEGEN}, {@code COST} and {@code FORMATTED}
 *       show more of the same and are refused.
 * </ul>
 */
final class AnalystCommands {
  private static final int MAX_FIELDS = 25;

  private AnalystCommands() {}

  /** {@code plan}, or the guard's answer to it. */
  static LogicalPlan rewrite(SparkSession session, LogicalPlan plan) {
    if (plan instanceof ShowFunctionsCommand show) {
      return showFunctions(show);
    }
    if (plan instanceof ExplainCommand explain) {
      return explain(session, explain);
    }
    return Grants.visible(session, plan); // SHOW VIEWS / TABLES: the granted views
  }

  private static LogicalPlan showFunctions(ShowFunctionsCommand show) {
    List<String> names = new ArrayList<>(Functions.get().shown());
    if (show.pattern().isDefined()) {
      names = CollectionConverters.asJava(
          StringUtils.filterPattern(seq(names), show.pattern().get()));
    }
    List<Row> rows = new ArrayList<>();
    if (show.showSystemFunctions()) {
      names.stream().sorted().forEach(name -> rows.add(RowFactory.create(name)));
    }
    return relation(show.output(), rows);
  }

  private static LogicalPlan explain(SparkSession session, ExplainCommand explain) {
    if (explain.mode() != SimpleMode$.MODULE$) {
      throw Refusal.of("metadata", "EXPLAIN " + explain.mode().name().toUpperCase()
          + " is not available: it shows the views' definitions and the lake's files; "
          + "EXPLAIN <query> shows your query over the views");
    }
    LogicalPlan analysed = ((org.apache.spark.sql.classic.SparkSession) session).sessionState()
        .executePlan(explain.logicalPlan(),
            org.apache.spark.sql.execution.CommandExecutionMode.SKIP())
        .analyzed();
    StringBuilder text = new StringBuilder("== Analysed query, over the catalog's views ==\n");
    print(analysed, 0, text);
    return relation(explain.output(), List.of(RowFactory.create(text.toString())));
  }

  /** One node a line, indented; a view of the catalog is a leaf, by name and columns. */
  private static void print(LogicalPlan plan, int depth, StringBuilder text) {
    text.append(depth == 0 ? "" : "   ".repeat(depth - 1) + "+- ");
    if (plan instanceof View view && !view.isTempView()) {
      text.append("View ").append(view.desc().identifier().unquotedString()).append(' ')
          .append(CollectionConverters.asJava(view.output()).stream()
              .map(column -> column.name()).toList())
          .append('\n');
      return;
    }
    text.append(plan.simpleString(MAX_FIELDS)).append('\n');
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      print(child, depth + 1, text);
    }
  }

  private static LocalRelation relation(Seq<org.apache.spark.sql.catalyst.expressions.Attribute>
      output, List<Row> rows) {
    return LocalRelation$.MODULE$.fromExternalRows(output, seq(rows));
  }

  private static <T> Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toList();
  }
}
