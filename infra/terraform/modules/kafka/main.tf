# Amazon MSK: three brokers, one per availability zone, TLS everywhere and
# SASL/SCRAM for clients (the settings' Kafka clients speak SCRAM-SHA-512
# with a username and password). The cluster defaults make a topic created
# by hand as durable as the platform's own: replication 3,
# min.insync.replicas 2, no unclean leader election, no auto-created topics.

locals {
  server_properties = {
    "auto.create.topics.enable"      = "false"
    "default.replication.factor"     = tostring(var.replication_factor)
    "min.insync.replicas"            = tostring(var.min_insync_replicas)
    "num.partitions"                 = tostring(var.partitions)
    "log.retention.ms"               = tostring(var.retention_ms)
    "unclean.leader.election.enable" = "false"
    "delete.topic.enable"            = "true"
  }
}

resource "aws_security_group" "brokers" {
  name        = "${var.name}-msk"
  description = "Kafka over TLS with SASL/SCRAM from the platform's clients"
  vpc_id      = var.vpc_id

  ingress {
    description = "SASL/SCRAM over TLS from inside the VPC"
    from_port   = 9096
    to_port     = 9096
    protocol    = "tcp"
    cidr_blocks = [var.client_cidr]
  }

  egress {
    description = "Replication between brokers inside the VPC"
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    cidr_blocks = [var.client_cidr]
  }
}

resource "aws_msk_configuration" "this" {
  name              = var.name
  kafka_versions    = [var.kafka_version]
  server_properties = join("\n", [for key, value in local.server_properties : "${key}=${value}"])
}

resource "aws_cloudwatch_log_group" "brokers" {
  name              = "/aws/msk/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
}

resource "aws_msk_cluster" "this" {
  cluster_name           = var.name
  kafka_version          = var.kafka_version
  number_of_broker_nodes = var.broker_count
  enhanced_monitoring    = "PER_TOPIC_PER_BROKER"

  broker_node_group_info {
    instance_type   = var.instance_type
    client_subnets  = var.subnet_ids
    security_groups = [aws_security_group.brokers.id]

    storage_info {
      ebs_storage_info {
        volume_size = var.volume_size_gb
      }
    }

    connectivity_info {
      public_access {
        type = "DISABLED"
      }
    }
  }

  configuration_info {
    arn      = aws_msk_configuration.this.arn
    revision = aws_msk_configuration.this.latest_revision
  }

  client_authentication {
    unauthenticated = false
    sasl {
      scram = true
    }
  }

  encryption_info {
    encryption_at_rest_kms_key_arn = var.kms_key_arn
    encryption_in_transit {
      client_broker = "TLS"
      in_cluster    = true
    }
  }

  logging_info {
    broker_logs {
      cloudwatch_logs {
        enabled   = true
        log_group = aws_cloudwatch_log_group.brokers.name
      }
    }
  }

  open_monitoring {
    prometheus {
      jmx_exporter {
        enabled_in_broker = true
      }
      node_exporter {
        enabled_in_broker = true
      }
    }
  }
}

# The SCRAM user of the platform. MSK reads SCRAM credentials only from
# secrets named AmazonMSK_* and encrypted with a customer-managed key. The
# password is generated here and lives in the secret (and in the encrypted
# Terraform state), never in an output.
resource "random_password" "scram" {
  length  = 32
  special = false
}

resource "aws_secretsmanager_secret" "scram" {
  # checkov:skip=CKV2_AWS_57: MSK SCRAM credentials have no managed rotation; rotating means a new user and a rolling client restart, done by hand (see README).
  name        = "AmazonMSK_${var.name}-${var.scram_username}"
  description = "SASL/SCRAM credentials of the platform's Kafka clients (WAP_KAFKA__SASL_PASSWORD)"
  kms_key_id  = var.kms_key_arn
}

resource "aws_secretsmanager_secret_version" "scram" {
  secret_id     = aws_secretsmanager_secret.scram.id
  secret_string = jsonencode({ username = var.scram_username, password = random_password.scram.result })
}

resource "aws_msk_scram_secret_association" "this" {
  cluster_arn     = aws_msk_cluster.this.arn
  secret_arn_list = [aws_secretsmanager_secret.scram.arn]
  depends_on      = [aws_secretsmanager_secret_version.scram]
}
