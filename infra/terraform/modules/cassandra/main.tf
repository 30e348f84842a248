# Amazon Keyspaces: the keyspace and every table of the speed and batch
# views. The tables come from tables.tf.json, generated from the CQL the
# code runs (layout/): same columns, types, partition keys, clustering
# order and TTL. Keyspaces manages storage itself, so Cassandra's
# compaction options do not apply.

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  keyspace_arn = "arn:${data.aws_partition.current.partition}:cassandra:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:/keyspace/${aws_keyspaces_keyspace.this.name}/"
  # Drivers read the system keyspaces to discover the "ring" and the schema.
  system_arn = "arn:${data.aws_partition.current.partition}:cassandra:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:/keyspace/system*"
}

resource "aws_keyspaces_keyspace" "this" {
  name = var.keyspace_name
}

resource "aws_keyspaces_table" "this" {
  for_each      = local.tables
  keyspace_name = aws_keyspaces_keyspace.this.name
  table_name    = each.key

  schema_definition {
    dynamic "column" {
      for_each = each.value.columns
      content {
        name = column.value.name
        type = column.value.type
      }
    }

    dynamic "partition_key" {
      for_each = each.value.partition_key
      content {
        name = partition_key.value
      }
    }

    dynamic "clustering_key" {
      for_each = each.value.clustering_key
      content {
        name     = clustering_key.value.name
        order_by = clustering_key.value.order_by
      }
    }
  }

  default_time_to_live = each.value.default_time_to_live

  dynamic "ttl" {
    for_each = each.value.default_time_to_live == null ? [] : [each.value.default_time_to_live]
    content {
      status = "ENABLED"
    }
  }

  capacity_specification {
    throughput_mode = "PAY_PER_REQUEST"
  }

  encryption_specification {
    type               = "CUSTOMER_MANAGED_KMS_KEY"
    kms_key_identifier = var.kms_key_arn
  }

  point_in_time_recovery {
    status = "ENABLED"
  }
}

# Keyspaces accepts the driver's plain username/password through an IAM
# user's service-specific credential. The user has no console password and
# no access keys; its group may only read and write the platform's tables.
resource "aws_iam_group" "clients" {
  name = "${var.name}-keyspaces-clients"
  path = "/wap/"
}

data "aws_iam_policy_document" "read_write" {
  statement {
    sid       = "ReadWritePlatformTables"
    actions   = ["cassandra:Select", "cassandra:Modify"]
    resources = [local.keyspace_arn, "${local.keyspace_arn}table/*"]
  }

  # The speed job owns its output tables: it creates its version's tables at start, a
  # Kappa replay's new version, adds a view's new measure, and drops superseded versions.
  statement {
    sid       = "SpeedJobOwnsItsTables"
    actions   = ["cassandra:Create", "cassandra:Alter", "cassandra:Drop"]
    resources = ["${local.keyspace_arn}table/speed_*"]
  }

  statement {
    sid       = "DriverReadsSystemTables"
    actions   = ["cassandra:Select"]
    resources = [local.system_arn]
  }
}

resource "aws_iam_group_policy" "read_write" {
  name   = "read-write-platform-tables"
  group  = aws_iam_group.clients.name
  policy = data.aws_iam_policy_document.read_write.json
}

resource "aws_iam_user" "client" {
  # checkov:skip=CKV_AWS_273: Keyspaces password authentication needs an IAM user's service-specific credential; SSO cannot issue one. The user has no console login and no access keys.
  name = "${var.name}-keyspaces"
  path = "/wap/"
}

resource "aws_iam_user_group_membership" "client" {
  user   = aws_iam_user.client.name
  groups = [aws_iam_group.clients.name]
}

resource "aws_iam_service_specific_credential" "client" {
  service_name = "cassandra.amazonaws.com"
  user_name    = aws_iam_user.client.name
}

resource "aws_secretsmanager_secret" "client" {
  # checkov:skip=CKV2_AWS_57: Keyspaces service-specific credentials have no managed rotation; rotate by creating a second credential, switching clients, then deleting the first (see README).
  name        = "${var.name}/keyspaces-client"
  description = "Keyspaces credentials of the platform (WAP_CASSANDRA__USERNAME / WAP_CASSANDRA__PASSWORD)"
  kms_key_id  = var.kms_key_arn
}

resource "aws_secretsmanager_secret_version" "client" {
  secret_id = aws_secretsmanager_secret.client.id
  secret_string = jsonencode({
    username = aws_iam_service_specific_credential.client.service_user_name
    password = aws_iam_service_specific_credential.client.service_password
  })
}
