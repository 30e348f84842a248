# One customer-managed key per environment encrypts every store of the
# platform (MSK, Keyspaces, S3, DynamoDB, Secrets Manager, CloudWatch Logs,
# MWAA). Services reach it through IAM (the account statement) except
# CloudWatch Logs, which needs a key-policy grant of its own.

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  account_arn = "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"
  logs_arn    = "arn:${data.aws_partition.current.partition}:logs:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:*"
}

resource "aws_kms_key" "platform" {
  description             = "${var.name}: encryption at rest for the web activity platform"
  enable_key_rotation     = true
  deletion_window_in_days = var.deletion_window_in_days
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "AccountAdministersTheKeyThroughIam"
        Effect    = "Allow"
        Principal = { AWS = local.account_arn }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        Sid       = "CloudWatchLogsEncryptsThisAccountsLogGroups"
        Effect    = "Allow"
        Principal = { Service = "logs.${data.aws_region.current.region}.amazonaws.com" }
        Action    = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
        Resource  = "*"
        Condition = { ArnLike = { "kms:EncryptionContext:aws:logs:arn" = local.logs_arn } }
      },
    ]
  })
}

resource "aws_kms_alias" "platform" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.platform.key_id
}
