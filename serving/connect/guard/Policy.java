package platform.sql;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/**
 * What an analyst may do on the SQL server, as data: the settings they may change or read,
 * the names they may read by, and the limits of one statement (its text's length and nesting,
 * its time, the largest value it may make, the partitions it may ask for, the statements one
 * identity may run at once). The functions they may call are {@link Functions}; the views
 * each may read, {@link Grants}. The server's own settings
 * ({@code spark.platform.sql.*}, written by {@code serving/connect/host.py} from
 * {@code SqlSettings}) fill it once, at first use.
 */
final class Policy {
  static final String SETTABLE_KEY = "spark.platform.sql.settable";
  static final String MAX_CHARS_KEY = "spark.platform.sql.maxStatementChars";
  static final String MAX_DEPTH_KEY = "spark.platform.sql.maxStatementDepth";
  static final String TIME_LIMIT_KEY = "spark.platform.sql.timeLimitSeconds";
  static final String MAX_VALUE_BYTES_KEY = "spark.platform.sql.maxValueBytes";
  static final String MAX_PARTITIONS_KEY = "spark.platform.sql.maxPartitions";
  static final String MAX_STATEMENTS_KEY = "spark.platform.sql.maxStatements";

  /** Settings analysts may SET when the server's configuration names none. */
  static final String DEFAULT_SETTABLE = String.join(",",
      "spark.sql.session.timeZone", "spark.sql.ansi.enabled", "spark.sql.timestampType",
      "spark.sql.legacy.timeParserPolicy", "spark.sql.datetime.java8API.enabled");

  /** Readable settings are those clients read (Spark SQL's, Spark Connect's, PySpark's),
   * minus secrets and paths. */
  private static final List<String> READABLE_PREFIXES = List.of(
      "spark.sql.", "spark.connect.", "spark.python.sql.", "spark.api.mode");
  private static final List<String> UNREADABLE_PREFIXES = List.of(
      "spark.sql.warehouse.dir", "spark.sql.catalog.", "spark.sql.extensions",
      "spark.sql.artifact.", "spark.sql.streaming.checkpointLocation", "spark.sql.hive.",
      "spark.sql.sources.", "spark.connect.authenticate.", "spark.connect.copyFromLocalToFs.",
      "spark.connect.grpc.", "spark.connect.extensions.", "spark.connect.ml.");
  private static final Pattern SECRET = Pattern.compile(
      "(?i)secret|password|token|credential|access[._-]?key|private|\\.jars?\\b|\\.path\\b|dir\\b");

  private static final Pattern PART = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
  private static final Set<String> NAMESPACES = Set.of("default", "global_temp");
  private static final String CATALOG = "spark_catalog";

  private static volatile Policy loaded;

  final Set<String> settable;
  final int maxChars;
  final int maxDepth;
  final long timeLimitMs;
  final long maxValueBytes;
  final int maxPartitions;
  /** ExecutePlan statements one identity may run at once ({@code access.max_statements}). */
  final int maxStatements;

  private Policy(SparkConf conf) {
    settable = Arrays.stream(conf.get(SETTABLE_KEY, DEFAULT_SETTABLE).split(","))
        .map(String::trim).filter(key -> !key.isEmpty())
        .collect(Collectors.toCollection(TreeSet::new));
    maxChars = Integer.parseInt(conf.get(MAX_CHARS_KEY, "100000"));
    maxDepth = Integer.parseInt(conf.get(MAX_DEPTH_KEY, "40"));
    timeLimitMs = (long) (Double.parseDouble(conf.get(TIME_LIMIT_KEY, "60")) * 1000);
    maxValueBytes = Long.parseLong(conf.get(MAX_VALUE_BYTES_KEY, String.valueOf(16L << 20)));
    maxPartitions = Integer.parseInt(conf.get(MAX_PARTITIONS_KEY, "8"));
    maxStatements = Integer.parseInt(conf.get(MAX_STATEMENTS_KEY, "2"));
  }

  /** The server's policy (its Spark configuration is read once). */
  static Policy get() {
    Policy policy = loaded;
    if (policy == null) {
      SparkEnv env = SparkEnv.get();
      policy = new Policy(env == null ? new SparkConf(false) : env.conf());
      loaded = policy;
    }
    return policy;
  }

  /** Refuses a SET or unset of {@code key} unless it is on the allow-list. */
  void checkSettable(String key) {
    if (!settable.contains(key.trim())) {
      throw Refusal.of("setting", key + " cannot be set on the SQL server; analysts may set "
          + String.join(", ", settable));
    }
  }

  /** Whether an analyst may read setting {@code key} (no secret, path, class or catalog). */
  static boolean readable(String key) {
    String k = key.trim();
    return READABLE_PREFIXES.stream().anyMatch(k::startsWith)
        && UNREADABLE_PREFIXES.stream().noneMatch(k::startsWith)
        && !SECRET.matcher(k).find();
  }

  /** Refuses reading setting {@code key} unless {@link #readable}. */
  static void checkReadable(String key) {
    if (!readable(key)) {
      throw Refusal.of("setting", key + " is not readable on the SQL server (secrets, paths "
          + "and the server's own settings are not shown)");
    }
  }

  /**
   * A relation's name as parsed: one part (a view or a temporary view), or the default or
   * global_temp namespace and one, optionally in {@code spark_catalog}. Never a path, a data
   * source ({@code delta.`/lake/...`}, {@code parquet.`...`}) or another catalog.
   */
  static boolean relationName(List<String> parts) {
    if (parts.isEmpty() || parts.size() > 3 || !parts.stream().allMatch(p -> PART.matcher(p)
        .matches())) {
      return false;
    }
    List<String> lower = parts.stream().map(p -> p.toLowerCase(Locale.ROOT)).toList();
    return switch (lower.size()) {
      case 1 -> true;
      case 2 -> NAMESPACES.contains(lower.get(0));
      default -> lower.get(0).equals(CATALOG) && NAMESPACES.contains(lower.get(1));
    };
  }

  /** A name as a client sends it unparsed ({@code spark.table("default.events")}). */
  static boolean relationName(String unparsed) {
    List<String> parts = Arrays.stream(unparsed.trim().split("\\.", -1))
        .map(part -> part.length() > 1 && part.startsWith("`") && part.endsWith("`")
            ? part.substring(1, part.length() - 1) : part)
        .toList();
    return relationName(parts);
  }

  /** A namespace an analyst may name: the catalog's default one (or global_temp). */
  static boolean namespace(List<String> parts) {
    List<String> lower = parts.stream().map(p -> p.toLowerCase(Locale.ROOT)).toList();
    return switch (lower.size()) {
      case 0 -> true;
      case 1 -> NAMESPACES.contains(lower.get(0)) || lower.get(0).equals(CATALOG);
      case 2 -> lower.get(0).equals(CATALOG) && NAMESPACES.contains(lower.get(1));
      default -> false;
    };
  }
}
