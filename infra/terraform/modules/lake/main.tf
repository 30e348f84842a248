# Object storage for the Delta lake (bronze, silver, gold), the streaming
# checkpoints, job artifacts and Spark logs, one prefix each, plus the
# DynamoDB table Delta's S3DynamoDBLogStore uses so that several writers
# (the speed layer's checkpoints aside, every batch job) can commit to the
# same table safely: S3 alone has no put-if-absent for the _delta_log.

locals {
  prefixes = {
    delta       = "delta"
    checkpoints = "checkpoints"
    artifacts   = "artifacts"
    logs        = "logs"
  }
}

resource "aws_s3_bucket" "lake" {
  # checkov:skip=CKV2_AWS_62: No consumer of object events exists; Delta readers find new data through the _delta_log, not notifications.
  # checkov:skip=CKV_AWS_144: Cross-region replication doubles storage cost; durability comes from S3 itself, versioning and Delta's log. Enable it where a second region is a requirement.
  bucket        = var.bucket_name
  force_destroy = false
}

resource "aws_s3_bucket_versioning" "lake" {
  bucket = aws_s3_bucket.lake.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_public_access_block" "lake" {
  bucket                  = aws_s3_bucket.lake.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "lake" {
  bucket = aws_s3_bucket.lake.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_logging" "lake" {
  bucket        = aws_s3_bucket.lake.id
  target_bucket = aws_s3_bucket.access_logs.id
  target_prefix = "lake/"
}

data "aws_iam_policy_document" "lake" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.lake.arn,
      "${aws_s3_bucket.lake.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "lake" {
  bucket = aws_s3_bucket.lake.id
  policy = data.aws_iam_policy_document.lake.json
}

# Delta deletes nothing itself: VACUUM removes files from the current
# version, versioning keeps them as noncurrent objects. Noncurrent versions
# are kept long enough to undo a bad VACUUM, then expire.
resource "aws_s3_bucket_lifecycle_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id

  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  rule {
    id     = "tier-old-delta-files"
    status = "Enabled"
    filter {
      prefix = "${local.prefixes.delta}/"
    }
    transition {
      days          = var.intelligent_tiering_after_days
      storage_class = "INTELLIGENT_TIERING"
    }
  }

  rule {
    id     = "expire-spark-logs"
    status = "Enabled"
    filter {
      prefix = "${local.prefixes.logs}/"
    }
    expiration {
      days = var.log_retention_days
    }
  }
}

# Access logs of the lake bucket. A log bucket does not log itself.
resource "aws_s3_bucket" "access_logs" {
  # checkov:skip=CKV_AWS_18: This is the access-log target; logging it into itself would loop.
  # checkov:skip=CKV2_AWS_62: Nothing consumes access-log events; they are read only during audits.
  # checkov:skip=CKV_AWS_144: Access logs are audit data of one region; replicating them is not worth the cost.
  # checkov:skip=CKV_AWS_145: S3 server access logging delivers only to buckets encrypted with SSE-S3, not SSE-KMS.
  bucket        = "${var.bucket_name}-access-logs"
  force_destroy = false
}

resource "aws_s3_bucket_versioning" "access_logs" {
  bucket = aws_s3_bucket.access_logs.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "access_logs" {
  bucket = aws_s3_bucket.access_logs.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "access_logs" {
  bucket                  = aws_s3_bucket.access_logs.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# Load balancers deliver their access logs under alb/ (SSE-S3, which they require).
data "aws_iam_policy_document" "access_logs" {
  statement {
    sid       = "LoadBalancerLogDelivery"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.access_logs.arn}/alb/*"]
    principals {
      type        = "Service"
      identifiers = ["logdelivery.elasticloadbalancing.amazonaws.com"]
    }
  }
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.access_logs.arn,
      "${aws_s3_bucket.access_logs.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "access_logs" {
  bucket = aws_s3_bucket.access_logs.id
  policy = data.aws_iam_policy_document.access_logs.json
}

resource "aws_s3_bucket_lifecycle_configuration" "access_logs" {
  bucket = aws_s3_bucket.access_logs.id
  rule {
    id     = "expire-access-logs"
    status = "Enabled"
    filter {}
    expiration {
      days = var.log_retention_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

# Delta's S3DynamoDBLogStore: one item per commit file, keyed by table path
# and file name; expired entries are removed by DynamoDB's TTL.
resource "aws_dynamodb_table" "delta_log" {
  name                        = "${var.name}-delta-log"
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "tablePath"
  range_key                   = "fileName"
  deletion_protection_enabled = true

  attribute {
    name = "tablePath"
    type = "S"
  }

  attribute {
    name = "fileName"
    type = "S"
  }

  ttl {
    attribute_name = "expireTime"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }
}

# Readers of the lake itself (DuckDB, pandas, any Delta reader) get none of the SQL
# server's rules: silver holds the fields the contracts classify restricted (userId,
# traits, the user agent, the truncated IP, the raw payload). Analysts' roles are given
# this policy, which reads the gold tables only: no silver, bronze, checkpoints or dims.
data "aws_iam_policy_document" "gold_reader" {
  statement {
    sid       = "ListGoldTables"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.lake.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${local.prefixes.delta}/gold/*"]
    }
  }

  statement {
    sid       = "ReadGoldTables"
    actions   = ["s3:GetObject"]
    resources = ["${aws_s3_bucket.lake.arn}/${local.prefixes.delta}/gold/*"]
  }

  statement {
    sid       = "DecryptLakeObjects"
    actions   = ["kms:Decrypt"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_policy" "gold_reader" {
  name        = "${var.name}-lake-gold-reader"
  description = "Read-only access to the lake's gold Delta tables, for analysts' direct readers."
  policy      = data.aws_iam_policy_document.gold_reader.json
}

# The same, per team: each team's policy opens the gold tables of the pipelines it may read
# (their owner, their declared readers; the admins every one), as the SQL server and the
# serving API grant them. readers.tf.json is generated from the declarations
# (python -m infra.terraform.generate); attach a team's policy to its analysts' roles.
data "aws_iam_policy_document" "team_gold_reader" {
  for_each = { for team, views in local.team_gold_views : team => views if length(views) > 0 }

  statement {
    sid       = "ListGrantedGoldTables"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.lake.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [for view in each.value : "${local.prefixes.delta}/gold/${view}/*"]
    }
  }

  statement {
    sid       = "ReadGrantedGoldTables"
    actions   = ["s3:GetObject"]
    resources = [for view in each.value : "${aws_s3_bucket.lake.arn}/${local.prefixes.delta}/gold/${view}/*"]
  }

  statement {
    sid       = "DecryptLakeObjects"
    actions   = ["kms:Decrypt"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_policy" "team_gold_reader" {
  for_each    = data.aws_iam_policy_document.team_gold_reader
  name        = "${var.name}-lake-gold-reader-${each.key}"
  description = "Read-only access to the gold tables of the pipelines team ${each.key} may read."
  policy      = each.value.json
}
