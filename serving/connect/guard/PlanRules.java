package platform.sql;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.connect.proto.AnalyzePlanRequest;
import org.apache.spark.connect.proto.Catalog;
import org.apache.spark.connect.proto.Command;
import org.apache.spark.connect.proto.ConfigRequest;
import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.Expression;
import org.apache.spark.connect.proto.KeyValue;
import org.apache.spark.connect.proto.Plan;
import org.apache.spark.connect.proto.Read;
import org.apache.spark.connect.proto.Relation;
import org.sparkproject.connect.protobuf.Descriptors.FieldDescriptor;
import org.sparkproject.connect.protobuf.Message;

/**
 * What a Spark Connect request may carry, decided on the request itself before Spark plans,
 * resolves or loads anything ({@link ProtocolGuard} calls it for every message).
 *
 * <p>Deny by default: a plan is a query over the catalog's views or one of the few allowed
 * commands ({@code spark.sql}, local temporary views); a request for analysis is one that
 * reads nothing; a configuration call touches only the allow-listed settings.
 */
final class PlanRules {
  private static final int MAX_NODES = 200_000;

  /** Protocol messages that carry client code (UDFs, data sources, serialized closures). */
  private static final Set<String> CLIENT_CODE = Set.of(
      "CommonInlineUserDefinedFunction", "CommonInlineUserDefinedTableFunction",
      "CommonInlineUserDefinedDataSource", "PythonUDF", "PythonUDTF", "PythonDataSource",
      "ScalarScalaUDF", "JavaUDF", "TypedAggregateExpression");

  private PlanRules() {}

  /** Refuses {@code message} (a request of ExecutePlan, AnalyzePlan or Config) if it must. */
  static void check(Object message) {
    if (message instanceof ExecutePlanRequest execute) {
      plan(execute.getPlan());
    } else if (message instanceof AnalyzePlanRequest analyze) {
      analyze(analyze);
    } else if (message instanceof ConfigRequest config) {
      config(config);
    }
  }

  private static void plan(Plan plan) {
    switch (plan.getOpTypeCase()) {
      case ROOT -> new Walk().message(plan.getRoot());
      case COMMAND -> command(plan.getCommand());
      case COMPRESSED_OPERATION -> throw Refusal.of("rpc", "compressed plans are not accepted "
          + "(the server sets spark.connect.session.planCompression.threshold to -1)");
      default -> throw Refusal.of("rpc", "an empty plan");
    }
  }

  private static void command(Command command) {
    switch (command.getCommandTypeCase()) {
      case SQL_COMMAND -> new Walk().message(command.getSqlCommand());
      case CREATE_DATAFRAME_VIEW -> {
        if (command.getCreateDataframeView().getIsGlobal()) {
          throw Refusal.of("write", "only local temporary views may be created "
              + "(createOrReplaceTempView), not global ones");
        }
        new Walk().message(command.getCreateDataframeView());
      }
      default -> {
        String name = command.getCommandTypeCase().name().toLowerCase(Locale.ROOT);
        String reason = name.contains("checkpoint") ? "cache" : "write";
        throw Refusal.of(reason, "the SQL server only runs queries: the " + name + " command is "
            + "not allowed (no writes, streams, checkpoints, functions, data sources, ML or "
            + "external commands)");
      }
    }
  }

  private static void analyze(AnalyzePlanRequest request) {
    switch (request.getAnalyzeCase()) {
      case PERSIST, UNPERSIST -> throw Refusal.of("cache", "caching is not available on the "
          + "SQL server (persist/cache/unpersist): a cache is held in the server's memory and "
          + "shared by every session");
      case INPUT_FILES -> throw Refusal.of("metadata", "inputFiles() is not available: the "
          + "files behind the views are the server's");
      case EXPLAIN -> throw Refusal.of("metadata", "explain() shows the physical plan, whose "
          + "scans name the lake's files; EXPLAIN in SQL shows your query over the views "
          + "(df.createOrReplaceTempView(\"q\"); spark.sql(\"EXPLAIN SELECT * FROM q\"))");
      default -> new Walk().message(request);
    }
  }

  private static void config(ConfigRequest request) {
    ConfigRequest.Operation operation = request.getOperation();
    Policy policy = Policy.get();
    switch (operation.getOpTypeCase()) {
      case SET -> operation.getSet().getPairsList().forEach(p -> policy.checkSettable(p.getKey()));
      case UNSET -> operation.getUnset().getKeysList().forEach(policy::checkSettable);
      case GET -> operation.getGet().getKeysList().forEach(Policy::checkReadable);
      case GET_OPTION -> operation.getGetOption().getKeysList().forEach(Policy::checkReadable);
      case GET_WITH_DEFAULT -> operation.getGetWithDefault().getPairsList().stream()
          .map(KeyValue::getKey).forEach(Policy::checkReadable);
      default -> { } // GET_ALL is filtered on its way out; IS_MODIFIABLE reads nothing
    }
  }

  /** One request's messages, walked through every field, nodes counted. */
  private static final class Walk {
    private int nodes;

    void message(Message message) {
      if (++nodes > MAX_NODES) {
        throw Refusal.of("statement_size", "the plan has more than " + MAX_NODES + " parts");
      }
      String type = message.getClass().getSimpleName();
      if (CLIENT_CODE.contains(type)) {
        throw Refusal.of("client_code", "code sent by the client does not run on the SQL "
            + "server (" + type + ": Python, Scala and Java functions, data sources)");
      }
      if (message instanceof Read read) {
        read(read);
      } else if (message instanceof Catalog catalog) {
        catalog(catalog);
      } else if (message instanceof Relation relation) {
        relation(relation);
      } else if (message instanceof Expression expression) {
        expression(expression);
      }
      for (Map.Entry<FieldDescriptor, Object> field : message.getAllFields().entrySet()) {
        Object value = field.getValue();
        if (value instanceof Message inner) {
          message(inner);
        } else if (value instanceof List<?> values) {
          for (Object item : values) {
            if (item instanceof Message inner) {
              message(inner);
            }
          }
        }
      }
    }

    private void read(Read read) {
      if (read.getIsStreaming()) {
        throw Refusal.of("read", "streaming reads are not available on the SQL server");
      }
      if (read.hasDataSource()) {
        Read.DataSource source = read.getDataSource();
        String format = source.hasFormat() ? source.getFormat() : "the default format";
        throw Refusal.of("data_source", "data sources cannot be read on the SQL server (" + format
            + "): only the catalog's views, by name (spark.table(\"events\"); SHOW VIEWS lists "
            + "them)");
      }
      if (read.hasNamedTable()) {
        name(read.getNamedTable().getUnparsedIdentifier());
      }
    }

    private void relation(Relation relation) {
      switch (relation.getRelTypeCase()) {
        case CACHED_LOCAL_RELATION, CHUNKED_CACHED_LOCAL_RELATION -> throw Refusal.of("rpc",
            "local data this large is uploaded as an artifact, which the SQL server does not "
            + "accept; send fewer rows");
        case CACHED_REMOTE_RELATION -> throw Refusal.of("cache", "cached remote relations are "
            + "not available on the SQL server");
        case ML_RELATION, EXTENSION, UNKNOWN -> throw Refusal.of("client_code", "the "
            + relation.getRelTypeCase().name().toLowerCase(Locale.ROOT)
            + " relation is not available on the SQL server");
        default -> { }
      }
    }

    private void catalog(Catalog catalog) {
      switch (catalog.getCatTypeCase()) {
        case CACHE_TABLE, UNCACHE_TABLE, CLEAR_CACHE -> throw Refusal.of("cache", "caching is "
            + "not available on the SQL server (cacheTable/uncacheTable/clearCache): a cache is "
            + "held in the server's memory and shared by every session");
        case CREATE_TABLE, CREATE_EXTERNAL_TABLE, DROP_GLOBAL_TEMP_VIEW, RECOVER_PARTITIONS,
            REFRESH_BY_PATH -> throw Refusal.of("write", "the SQL server is read-only: catalog "
            + catalog.getCatTypeCase().name().toLowerCase(Locale.ROOT) + " is not allowed");
        case SET_CURRENT_CATALOG -> {
          if (!Policy.namespace(List.of(catalog.getSetCurrentCatalog().getCatalogName()))) {
            throw Refusal.of("read", "the SQL server has one catalog, spark_catalog");
          }
        }
        case SET_CURRENT_DATABASE -> namespace(catalog.getSetCurrentDatabase().getDbName());
        case GET_DATABASE -> namespace(catalog.getGetDatabase().getDbName());
        case DATABASE_EXISTS -> namespace(catalog.getDatabaseExists().getDbName());
        case LIST_TABLES -> {
          if (catalog.getListTables().hasDbName()) {
            namespace(catalog.getListTables().getDbName());
          }
        }
        case LIST_FUNCTIONS -> throw Refusal.of("metadata", "listFunctions() is not "
            + "available; SHOW FUNCTIONS lists the functions analysts may call");
        case LIST_COLUMNS -> name(catalog.getListColumns().getTableName());
        case GET_TABLE -> name(catalog.getGetTable().getTableName());
        case TABLE_EXISTS -> name(catalog.getTableExists().getTableName());
        case IS_CACHED -> name(catalog.getIsCached().getTableName());
        case REFRESH_TABLE -> name(catalog.getRefreshTable().getTableName());
        default -> { }
      }
    }

    private void expression(Expression expression) {
      String function = switch (expression.getExprTypeCase()) {
        case UNRESOLVED_FUNCTION -> expression.getUnresolvedFunction().getFunctionName();
        case CALL_FUNCTION -> expression.getCallFunction().getFunctionName();
        case EXTENSION -> throw Refusal.of("client_code", "expression extensions are not "
            + "available on the SQL server");
        default -> null;
      };
      if (function != null) { // a DataFrame's call, by name: the analysts' functions only
        Functions.get().checkName(List.of(function.split("\\.", -1)));
      }
    }

    private static void name(String unparsed) {
      if (!Policy.relationName(unparsed)) {
        throw Refusal.of("read", "only the catalog's views can be read, by name (SHOW VIEWS "
            + "lists them), not " + (unparsed.matches("[A-Za-z0-9_.`]*") ? unparsed : "a path")
            + " (no paths, data sources or other catalogs)");
      }
    }

    private static void namespace(String name) {
      if (!Policy.namespace(List.of(name.split("\\.", -1)))) {
        throw Refusal.of("read", "the SQL server's views are in the default namespace, not "
            + name);
      }
    }
  }
}
