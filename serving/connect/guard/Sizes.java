package platform.sql;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.HigherOrderFunction;
import org.apache.spark.sql.catalyst.expressions.LambdaFunction;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedLambdaVariable;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.expressions.RuntimeReplaceable;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.CTERelationDef;
import org.apache.spark.sql.catalyst.plans.logical.CTERelationRef;
import org.apache.spark.sql.catalyst.plans.logical.Generate;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.catalyst.plans.logical.WithCTE;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.CalendarInterval;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * How large a value a statement can make: an upper bound, in bytes, of every expression and of
 * every row, checked before the optimizer folds constants (which it does on the driver).
 *
 * <p>{@code length(repeat('x', 900000000))} is folded by the optimizer into one 900 MB string in
 * the driver's heap, and a heap that runs out ends the server for every session. So each
 * expression's result has a bound: a literal its own size, a column of the data
 * {@value #DATA} bytes (the largest value an event carries), most functions the sum of their
 * arguments', those that multiply ({@code repeat}, {@code lpad}, {@code array_repeat},
 * {@code sequence}, {@code replace}, {@code concat_ws}, {@code hex} ...) their product, with
 * constant counts only. Bounds follow columns through projections, aggregates, windows,
 * generators, subqueries and WITH clauses; a statement with an expression or a row over
 * {@code sql.max_value_bytes} is refused before it runs. Inline tables ({@code VALUES}), which
 * Spark evaluates while it resolves them, are bounded when the text is parsed.
 */
final class Sizes {
  static final long DATA = 64L * 1024;
  private static final long SMALL = 16;
  private static final Set<String> GROWERS = Set.of(
      "StringRepeat", "repeat", "StringSpace", "space", "StringLPad", "StringRPad", "BinaryPad",
      "lpad", "rpad", "ArrayRepeat", "array_repeat", "Sequence", "sequence", "ArrayInsert",
      "array_insert", "FormatNumber", "format_number", "StringReplace", "replace",
      "RegExpReplace", "regexp_replace");
  private static final Map<String, Integer> FACTORS = Map.ofEntries(
      Map.entry("Hex", 2), Map.entry("hex", 2), Map.entry("Base64", 2), Map.entry("base64", 2),
      Map.entry("StringDecode", 2), Map.entry("Decode", 2), Map.entry("decode", 2),
      Map.entry("Upper", 3), Map.entry("upper", 3), Map.entry("ucase", 3), Map.entry("Lower", 3),
      Map.entry("lower", 3), Map.entry("lcase", 3), Map.entry("InitCap", 3),
      Map.entry("initcap", 3), Map.entry("UrlEncode", 3), Map.entry("url_encode", 3),
      Map.entry("Encode", 4), Map.entry("encode", 4), Map.entry("Cast", 4), Map.entry("cast", 4),
      Map.entry("StructsToJson", 6), Map.entry("to_json", 6));

  private final long limit;
  private final Map<ExprId, Long> columns = new HashMap<>();
  private final Map<Long, List<Long>> ctes = new HashMap<>();
  private int lambdas;

  private Sizes(long limit) {
    this.limit = limit;
  }

  /** Refuses an analysed {@code plan} that can make a value or a row over {@code limit}. */
  static void checkPlan(LogicalPlan plan, long limit) {
    new Sizes(limit).plan(plan);
  }

  /** Refuses a parsed inline table's rows ({@code VALUES ...}) over {@code limit}. */
  static void checkRows(Seq<Seq<Expression>> rows, long limit) {
    Sizes sizes = new Sizes(limit);
    for (Seq<Expression> row : list(rows)) {
      long total = 0;
      for (Expression value : list(row)) {
        total += sizes.bound(value);
      }
      sizes.within(total, "a row of VALUES");
    }
  }

  /** The bounds of {@code plan}'s output columns, in order. */
  private List<Long> plan(LogicalPlan plan) {
    if (plan instanceof View view && !view.isTempView()) {
      return data(plan.output()); // the server's view: columns of the data
    }
    if (plan instanceof WithCTE with) {
      for (LogicalPlan definition : list(with.cteDefs())) {
        CTERelationDef def = (CTERelationDef) definition;
        ctes.put(def.id(), plan(def.child()));
      }
      return plan(with.plan());
    }
    if (plan instanceof CTERelationRef ref) {
      return assign(plan.output(), ctes.getOrDefault(ref.cteId(), null));
    }
    if (plan instanceof LocalRelation local) {
      return assign(plan.output(), literalRows(local));
    }
    List<LogicalPlan> children = list(plan.children());
    List<List<Long>> inputs = new ArrayList<>();
    for (LogicalPlan child : children) {
      inputs.add(plan(child));
    }
    List<Attribute> output = list(plan.output());
    if (plan instanceof Project project) {
      named(list(project.projectList()));
    } else if (plan instanceof Aggregate aggregate) {
      named(list(aggregate.aggregateExpressions()));
    } else if (plan instanceof Window window) {
      named(list(window.windowExpressions()));
    } else if (plan instanceof Generate generate) {
      long each = bound((Expression) generate.generator());
      for (Attribute column : list(generate.generatorOutput())) {
        columns.put(column.exprId(), each);
      }
    } else {
      for (Expression expression : list(plan.expressions())) {
        within(bound(expression), "an expression");
      }
      if (children.size() == 1 && output.size() == inputs.get(0).size()) {
        for (int i = 0; i < output.size(); i++) { // a node that renames its child's columns
          columns.putIfAbsent(output.get(i).exprId(), inputs.get(0).get(i));
        }
      } else if (children.size() > 1 && plan.getClass().getSimpleName().equals("Union")) {
        for (List<Long> input : inputs) {
          for (int i = 0; i < output.size() && i < input.size(); i++) {
            columns.merge(output.get(i).exprId(), input.get(i), Math::max);
          }
        }
      }
    }
    List<Long> bounds = new ArrayList<>();
    long row = 0;
    for (Attribute column : output) {
      long bound = columns.getOrDefault(column.exprId(), DATA);
      bounds.add(bound);
      row += bound;
    }
    within(row, "a row");
    return bounds;
  }

  private void named(List<? extends NamedExpression> expressions) {
    for (NamedExpression expression : expressions) {
      long bound = bound((Expression) expression);
      within(bound, "an expression");
      columns.put(expression.exprId(), bound);
    }
  }

  private List<Long> assign(Seq<Attribute> output, List<Long> bounds) {
    List<Attribute> columns = list(output);
    List<Long> assigned = new ArrayList<>();
    for (int i = 0; i < columns.size(); i++) {
      long bound = bounds != null && i < bounds.size() ? bounds.get(i) : DATA;
      this.columns.put(columns.get(i).exprId(), bound);
      assigned.add(bound);
    }
    return assigned;
  }

  private List<Long> data(Seq<Attribute> output) {
    return assign(output, null);
  }

  /** A literal relation's columns: the largest value each holds (the data, not a guess). */
  private static List<Long> literalRows(LocalRelation local) {
    List<Attribute> output = list(local.output());
    long[] largest = new long[output.size()];
    for (InternalRow row : list(local.data())) {
      for (int i = 0; i < largest.length; i++) {
        largest[i] = Math.max(largest[i], size(row.isNullAt(i) ? null
            : row.get(i, output.get(i).dataType()), output.get(i).dataType()));
      }
    }
    List<Long> bounds = new ArrayList<>();
    for (long size : largest) {
      bounds.add(Math.max(SMALL, size));
    }
    return bounds;
  }

  /** An upper bound of {@code expression}'s value, in bytes. */
  long bound(Expression expression) {
    if (expression instanceof Literal literal) {
      return size(literal.value(), literal.dataType());
    }
    if (expression instanceof AttributeReference reference) {
      return columns.getOrDefault(reference.exprId(), DATA);
    }
    if (expression instanceof NamedLambdaVariable variable) {
      return columns.getOrDefault(variable.exprId(), DATA);
    }
    String kind = kind(expression);
    if (GROWERS.contains(kind) && lambdas > 0) {
      throw Refusal.of("statement_size", name(expression) + " cannot be used inside a lambda "
          + "(transform, filter ...): the SQL server could not bound its size");
    }
    if (expression instanceof HigherOrderFunction) {
      return higherOrder(expression);
    }
    if (expression instanceof PlanExpression<?> subquery
        && subquery.plan() instanceof LogicalPlan inner) { // the optimizer folds in there too
      long largest = plan(inner).stream().mapToLong(Long::longValue).max().orElse(SMALL);
      return Math.max(SMALL, largest + sum(list(expression.children())));
    }
    List<Expression> args = list(expression.children());
    long bound = switch (kind) {
      case "StringRepeat", "repeat", "ArrayRepeat", "array_repeat" ->
          bound(args.get(0)) * count(expression, args.get(1));
      case "StringSpace", "space" -> count(expression, args.get(0));
      case "StringLPad", "StringRPad", "BinaryPad", "lpad", "rpad" ->
          4 * count(expression, args.get(1)) + bound(args.get(0));
      case "Sequence", "sequence" -> SMALL * elements(expression, args);
      case "ArrayInsert", "array_insert" ->
          bound(args.get(0)) + bound(args.get(2)) + 8 * Math.abs(count(expression, args.get(1)));
      case "FormatNumber", "format_number" -> bound(args.get(0)) + 64
          + (args.get(1).resolved() && args.get(1).dataType() instanceof StringType
              ? bound(args.get(1)) : count(expression, args.get(1)));
      case "StringReplace", "replace", "RegExpReplace", "regexp_replace" -> args.size() < 3
          ? bound(args.get(0)) : bound(args.get(0)) * Math.max(1, bound(args.get(2)))
              + bound(args.get(2));
      case "ConcatWs", "concat_ws" -> (sum(args.subList(1, args.size())) + 1)
          * (1 + bound(args.get(0)));
      case "ArrayJoin", "array_join" -> (bound(args.get(0)) + 1) * (1 + bound(args.get(1)))
          + (args.size() > 2 ? bound(args.get(2)) : 0);
      default -> FACTORS.getOrDefault(kind, 1) * sum(args);
    };
    bound = Math.max(SMALL, bound);
    within(bound, name(expression));
    return bound;
  }

  private long higherOrder(Expression function) {
    List<Expression> args = list(function.children());
    long input = 0;
    for (Expression arg : args) {
      if (!(arg instanceof LambdaFunction)) {
        input += bound(arg);
      }
    }
    long total = input;
    lambdas++;
    try {
      for (Expression arg : args) {
        if (arg instanceof LambdaFunction lambda) {
          for (NamedExpression variable : list(lambda.arguments())) {
            if (variable instanceof NamedLambdaVariable named) {
              columns.put(named.exprId(), input);
            }
          }
          total += bound(lambda.function());
        }
      }
    } finally {
      lambdas--;
    }
    within(total, name(function));
    return total;
  }

  private long sum(List<Expression> expressions) {
    long total = 0;
    for (Expression expression : expressions) {
      total += bound(expression);
      within(total, "an expression");
    }
    return total;
  }

  /** A count argument: a constant within the bound, else refused. */
  private long count(Expression function, Expression argument) {
    Object value = constant(function, argument);
    long count = value instanceof Number number ? number.longValue() : 0;
    if (Math.abs(count) > limit) {
      throw refused(name(function), Math.abs(count));
    }
    return Math.max(0, count);
  }

  /** The elements of {@code sequence(start, stop[, step])} with constant arguments. */
  private long elements(Expression function, List<Expression> args) {
    long start = number(constant(function, args.get(0)), false);
    long stop = number(constant(function, args.get(1)), false);
    String unit = args.get(0).dataType().typeName();
    boolean days = unit.equals("date");
    boolean micros = unit.startsWith("timestamp");
    long step = days ? 1 : micros ? DAY_MICROS : 1;
    if (args.size() > 2) {
      Object value = constant(function, args.get(2));
      String type = args.get(2).dataType().typeName();
      step = type.startsWith("interval year") || type.startsWith("interval month")
          ? number(value, false) * 28 * (micros ? DAY_MICROS : 1)
          : type.startsWith("interval") && !type.equals("interval") && days
              ? number(value, false) / DAY_MICROS
              : number(value, days);
    }
    long span = Math.abs(stop - start) / Math.max(1, Math.abs(step)) + 1;
    if (span > limit / SMALL || span < 0) {
      throw refused(name(function), span * SMALL);
    }
    return span;
  }

  private static final long DAY_MICROS = 86_400_000_000L;

  /** A constant as one long: numbers, days, microseconds; a calendar interval in days when
   * {@code days}, else in microseconds. */
  private static long number(Object value, boolean days) {
    if (value instanceof Number number) {
      return number.longValue();
    }
    if (value instanceof CalendarInterval interval) {
      long whole = interval.months * 28L + interval.days;
      return days ? Math.max(1, whole + interval.microseconds / DAY_MICROS)
          : whole * DAY_MICROS + interval.microseconds;
    }
    return 1;
  }

  private static Object constant(Expression function, Expression argument) {
    while (argument instanceof RuntimeReplaceable replaceable) { // to_date('...') and kin
      argument = replaceable.replacement();
    }
    if (!argument.foldable()) {
      throw Refusal.of("statement_size", "the size argument of " + name(function) + " must be "
          + "a constant, so the SQL server can bound what it makes");
    }
    return argument.eval(null);
  }

  private void within(long bound, String what) {
    if (bound > limit || bound < 0) {
      throw refused(what, bound);
    }
  }

  private Refusal refused(String what, long bound) {
    return Refusal.of("statement_size", what + " could make a value of "
        + (bound < 0 ? "more than 2^63" : String.valueOf(bound)) + " bytes, more than the SQL "
        + "server's limit of " + limit + " (sql.max_value_bytes); make smaller values");
  }

  private static long size(Object value, DataType type) {
    if (value instanceof UTF8String text) {
      return text.numBytes();
    }
    if (value instanceof byte[] bytes && type instanceof BinaryType) {
      return bytes.length;
    }
    if (value == null) {
      return SMALL;
    }
    String text = value.toString();
    return Math.max(SMALL, text.length());
  }

  private static String kind(Expression expression) {
    if (expression instanceof UnresolvedFunction function) {
      List<String> parts = list(function.nameParts());
      return parts.isEmpty() ? "" : parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
    }
    return expression.getClass().getSimpleName();
  }

  private static String name(Expression expression) {
    return expression instanceof UnresolvedFunction ? kind(expression) : expression.prettyName();
  }

  private static <T> List<T> list(Seq<T> seq) {
    return CollectionConverters.asJava(seq);
  }

  private static <T> List<T> list(scala.collection.Seq<T> seq) {
    return CollectionConverters.asJava(seq);
  }
}
