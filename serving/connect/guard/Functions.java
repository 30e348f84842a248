package platform.sql;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;

import scala.Option;

/**
 * The functions analysts may call: the one list in {@code analyst-functions.txt} (bundled in
 * the guard's jar), read once.
 *
 * <p>It decides three times: by name when a text is parsed ({@link GuardedParser}) and when a
 * DataFrame plan arrives ({@link PlanRules}), before Spark resolves anything (some functions
 * open files or URLs while they are resolved: {@code from_xml}'s XSD option, Protobuf
 * descriptors, Avro schema URLs); and by expression class when a plan has been analysed
 * ({@link ReadOnlyGuard}): the classes Spark's registry names for the listed functions, plus
 * the expressions Spark itself makes while it resolves them ({@link #INTERNAL}). A name or a
 * class that is not on the list is refused: "Refused by the SQL server: f is not available to
 * analysts".
 */
final class Functions {
  static final String RESOURCE = "platform/sql/analyst-functions.txt";
  private static final String TVF = "tvf:";

  /**
   * Expressions Spark makes itself while it resolves a query of listed functions: references,
   * aliases, casts of its type coercion, aggregate and window wrappers, lambdas, subqueries,
   * field access, and the classes the registry's builders return for listed names
   * ({@code ceil} -> {@code RoundCeil}, {@code lpad} -> {@code StringLPad} ...).
   */
  private static final Set<String> INTERNAL = Set.of(
      "Alias", "AttributeReference", "OuterReference", "Literal", "TypedNullLiteral", "Cast",
      "UpCast", "TryEval", "KnownNullable", "KnownNotNull", "With", "CommonExpressionDef",
      "CommonExpressionRef", "aggregate.AggregateExpression", "WindowExpression",
      "WindowSpecDefinition", "SpecifiedWindowFrame", "UnspecifiedFrame$", "CurrentRow$",
      "UnboundedPreceding$", "UnboundedFollowing$", "SortOrder", "LambdaFunction",
      "NamedLambdaVariable", "ScalarSubquery", "Exists", "ListQuery", "InSubquery",
      "LateralSubquery", "GetStructField", "GetArrayItem", "GetMapValue", "GetArrayStructFields",
      "UpdateFields", "WithField", "DropField", "CreateNamedStruct", "CaseWhen", "If", "Not",
      "InSet", "Like", "LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny", "Concat",
      "UnaryMinus", "UnaryPositive", "PreciseTimestampConversion", "TimeWindow",
      "TimestampAdd", "TimestampDiff", "DateAddInterval", "DateAddYMInterval",
      "TimestampAddInterval", "TimestampAddYMInterval", "DatetimeSub", "SubtractDates",
      "SubtractTimestamps", "MultiplyYMInterval", "MultiplyDTInterval", "DivideYMInterval",
      "DivideDTInterval", "ExtractANSIIntervalDays", "ExtractANSIIntervalHours",
      "ExtractANSIIntervalMinutes", "ExtractANSIIntervalMonths", "ExtractANSIIntervalYears",
      "ExtractANSIIntervalSeconds", "SecondWithFraction", "ExtractIntervalYears",
      "ExtractIntervalMonths", "ExtractIntervalDays", "ExtractIntervalHours",
      "ExtractIntervalMinutes", "ExtractIntervalSeconds", "Ceil", "RoundCeil", "Floor",
      "RoundFloor", "BinaryPad", "StringLPad", "StringRPad", "BinaryPredicate", "Contains",
      "StartsWith", "EndsWith", "Explode", "PosExplode", "Inline", "Hour", "Minute", "Second",
      "MakeTimestamp", "MakeTimestampNTZ", "MakeTimestampFromDateTime", "TryMakeTimestamp",
      "TryMakeTimestampFromDateTime", "Mask", "RaiseError", "StringDecode", "ToCharacter",
      "variant.ParseJson", "variant.VariantGet", "aggregate.Mode", "aggregate.PercentileCont",
      "aggregate.PercentileDisc", "aggregate.Product", "aggregate.Average", "aggregate.Sum",
      "aggregate.TryAverage", "aggregate.TrySum", "aggregate.PivotFirst", "ParseToTimestamp", "ParseToDate",
      "CurrentDate", "DatePart", "ToPrettyString", "Grouping", "GroupingID", "SpecialFrameBoundary");
  private static final String PACKAGE = "org.apache.spark.sql.catalyst.expressions.";
  /** The encoders' expressions (rows to objects and back), which the server's own Dataset code
   * puts in a plan (show(), tableExists(), approxQuantile() ...): no name and no message of
   * the protocol makes one, and typed functions of clients are refused as client code. */
  private static final String ENCODERS = PACKAGE + "objects.";

  private static volatile Functions loaded;

  /** Group title -> names, in the file's order. */
  final Map<String, List<String>> groups;
  private final Set<String> names;
  private final Set<String> tableFunctions;
  private final Set<String> classes;

  private Functions(String text) {
    Map<String, List<String>> byGroup = new LinkedHashMap<>();
    Set<String> scalar = new TreeSet<>();
    Set<String> table = new TreeSet<>();
    List<String> current = null;
    for (String line : text.split("\n")) {
      String trimmed = line.strip();
      if (trimmed.isEmpty() || trimmed.startsWith("#")) {
        continue;
      }
      if (trimmed.startsWith("[")) {
        current = new java.util.ArrayList<>();
        byGroup.put(trimmed.substring(trimmed.indexOf(']') + 1).strip(), current);
        continue;
      }
      for (String name : trimmed.split("\\s+")) {
        String lower = name.toLowerCase(Locale.ROOT);
        current.add(lower);
        if (lower.startsWith(TVF)) {
          table.add(lower.substring(TVF.length()));
        } else {
          scalar.add(lower);
        }
      }
    }
    groups = Collections.unmodifiableMap(byGroup);
    names = Collections.unmodifiableSet(scalar);
    tableFunctions = Collections.unmodifiableSet(table);
    Set<String> allowed = new HashSet<>();
    for (String internal : INTERNAL) {
      allowed.add(PACKAGE + internal);
    }
    for (String name : scalar) {
      Option<ExpressionInfo> info =
          FunctionRegistry$.MODULE$.builtin().lookupFunction(FunctionIdentifier.apply(name));
      if (info.isDefined() && info.get().getClassName() != null) {
        allowed.add(info.get().getClassName());
      }
    }
    classes = Collections.unmodifiableSet(allowed);
  }

  /** The list (read from the guard's jar once). */
  static Functions get() {
    Functions functions = loaded;
    if (functions == null) {
      try (InputStream in = Functions.class.getClassLoader().getResourceAsStream(RESOURCE)) {
        if (in == null) {
          throw new IllegalStateException(RESOURCE + " is missing from the guard's jar");
        }
        functions = new Functions(new String(in.readAllBytes(), StandardCharsets.UTF_8));
      } catch (IOException unreadable) {
        throw new IllegalStateException("cannot read " + RESOURCE, unreadable);
      }
      loaded = functions;
    }
    return functions;
  }

  /** The names SHOW FUNCTIONS lists: the scalar ones and the table-valued ones. */
  Set<String> shown() {
    Set<String> all = new TreeSet<>(names);
    all.addAll(tableFunctions);
    return all;
  }

  /** Refuses a call of {@code parts} (a function's name as written) unless it is listed. */
  void checkName(List<String> parts) {
    String name = parts.isEmpty() ? "" : parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
    boolean qualified = parts.size() > 1 && !builtin(parts.subList(0, parts.size() - 1));
    if (qualified || !names.contains(name)) {
      throw refusal(String.join(".", parts));
    }
  }

  /** Refuses a table-valued function ({@code FROM f(...)}) unless it is listed. */
  void checkTableFunction(List<String> parts) {
    String name = parts.isEmpty() ? "" : parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
    boolean qualified = parts.size() > 1 && !builtin(parts.subList(0, parts.size() - 1));
    if (qualified || !tableFunctions.contains(name)) {
      throw refusal(String.join(".", parts));
    }
  }

  /** Refuses an analysed expression whose class is not one of the listed functions'. */
  void checkClass(Expression expression) {
    String type = expression.getClass().getName();
    if (!classes.contains(type) && !type.startsWith(ENCODERS)) {
      throw refusal(expression.prettyName());
    }
  }

  private static boolean builtin(List<String> qualifier) {
    String joined = String.join(".", qualifier).toLowerCase(Locale.ROOT);
    return joined.equals("builtin") || joined.equals("system.builtin");
  }

  private static Refusal refusal(String name) {
    String shown = name.matches("[A-Za-z0-9_.<>=!&|^~+*/%-]{1,80}") ? name : "this function";
    return Refusal.of("function", shown + " is not available to analysts (SHOW FUNCTIONS "
        + "lists the functions the SQL server offers; docs/sql.md has them by group)");
  }
}
