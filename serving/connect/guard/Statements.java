package platform.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.connect.proto.Command;
import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.Expression;
import org.apache.spark.connect.proto.Plan;
import org.apache.spark.connect.proto.Relation;
import org.sparkproject.connect.protobuf.Descriptors.FieldDescriptor;
import org.sparkproject.connect.protobuf.Message;

/**
 * What a statement was, for its audit record: the SQL text of {@code spark.sql(...)} (the
 * host masks its literals), or, for a DataFrame's plan, its relations described in order
 * ({@code DataFrame: limit < aggregate < filter < read events}): which views it reads and what
 * it does with them, never a value it carries.
 */
final class Statements {
  private static final int MAX_CHARS = 20_000;
  private static final int MAX_PARTS = 40;

  private Statements() {}

  static String text(ExecutePlanRequest request) {
    Plan plan = request.getPlan();
    String text;
    if (plan.hasCommand()) {
      text = command(plan.getCommand());
    } else if (plan.hasRoot()) {
      text = relation(plan.getRoot());
    } else {
      text = "(no plan)";
    }
    return text.length() > MAX_CHARS ? text.substring(0, MAX_CHARS) + "..." : text;
  }

  /** {@code spark.sql(...)}: a command whose answer may be the query, handed back. */
  static boolean sqlCommand(ExecutePlanRequest request) {
    return request.getPlan().hasCommand() && request.getPlan().getCommand().hasSqlCommand();
  }

  /** A plan of nothing but the rows it carries: what a client sends to read a command's
   * answer back (SHOW VIEWS' rows), no read of the server's. */
  static boolean readsNothing(ExecutePlanRequest request) {
    return request.getPlan().hasRoot() && request.getPlan().getRoot().hasLocalRelation();
  }

  private static String command(Command command) {
    return switch (command.getCommandTypeCase()) {
      case SQL_COMMAND -> command.getSqlCommand().hasInput()
          ? relation(command.getSqlCommand().getInput())
          : command.getSqlCommand().getSql();
      case CREATE_DATAFRAME_VIEW -> "CREATE TEMP VIEW "
          + command.getCreateDataframeView().getName() + " AS "
          + relation(command.getCreateDataframeView().getInput());
      default -> "command " + command.getCommandTypeCase().name().toLowerCase(Locale.ROOT);
    };
  }

  private static String relation(Relation root) {
    if (root.hasSql()) {
      return root.getSql().getQuery();
    }
    List<String> parts = new ArrayList<>();
    describe(root, parts);
    return "DataFrame: " + String.join(" < ", parts);
  }

  /** The relations under {@code message}, depth first: their kinds, a read's view name and
   * the text of an SQL relation inside a DataFrame's plan. */
  private static void describe(Message message, List<String> parts) {
    if (parts.size() >= MAX_PARTS) {
      return;
    }
    if (message instanceof Relation relation) {
      switch (relation.getRelTypeCase()) {
        case READ -> parts.add(relation.getRead().hasNamedTable()
            ? "read " + relation.getRead().getNamedTable().getUnparsedIdentifier() : "read");
        case SQL -> parts.add("sql(" + relation.getSql().getQuery() + ")");
        default -> parts.add(relation.getRelTypeCase().name().toLowerCase(Locale.ROOT));
      }
      if (relation.hasSql()) {
        return;
      }
    }
    for (Map.Entry<FieldDescriptor, Object> field : message.getAllFields().entrySet()) {
      Object value = field.getValue();
      for (Object item : value instanceof List<?> values ? values : List.of(value)) {
        if (item instanceof Message inner && !(inner instanceof Expression)) {
          describe(inner, parts);
        }
      }
    }
  }
}
