# Amazon MWAA schedules the batch layer. Its bucket holds the project's
# dags/ folder, the requirements the DAGs import and a startup script that
# exports the platform's WAP_* settings (non-secret values from Terraform,
# passwords fetched from Secrets Manager when a worker starts), so DAGs load
# the same settings object as everywhere else.

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  account = data.aws_caller_identity.current.account_id
  region  = data.aws_region.current.region
  arn     = "arn:${data.aws_partition.current.partition}"
  env_arn = "${local.arn}:airflow:${local.region}:${local.account}:environment/${var.name}"
}

resource "aws_s3_bucket" "airflow" {
  # checkov:skip=CKV2_AWS_62: MWAA polls the bucket itself; no event consumer exists.
  # checkov:skip=CKV_AWS_144: The bucket only holds deployable copies of files kept in git; replication adds nothing.
  bucket        = var.bucket_name
  force_destroy = false
}

resource "aws_s3_bucket_versioning" "airflow" {
  bucket = aws_s3_bucket.airflow.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "airflow" {
  bucket = aws_s3_bucket.airflow.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_public_access_block" "airflow" {
  bucket                  = aws_s3_bucket.airflow.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_logging" "airflow" {
  bucket        = aws_s3_bucket.airflow.id
  target_bucket = var.access_log_bucket
  target_prefix = "airflow/"
}

data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.airflow.arn, "${aws_s3_bucket.airflow.arn}/*"]
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

resource "aws_s3_bucket_policy" "airflow" {
  bucket = aws_s3_bucket.airflow.id
  policy = data.aws_iam_policy_document.bucket.json
}

resource "aws_s3_bucket_lifecycle_configuration" "airflow" {
  bucket = aws_s3_bucket.airflow.id
  rule {
    id     = "expire-old-deployments"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = 90
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

resource "aws_s3_object" "dags" {
  for_each   = fileset(var.dags_dir, "**/*.py")
  bucket     = aws_s3_bucket.airflow.id
  key        = "dags/${each.key}"
  source     = "${var.dags_dir}/${each.key}"
  etag       = filemd5("${var.dags_dir}/${each.key}")
  kms_key_id = var.kms_key_arn
}

resource "aws_s3_object" "requirements" {
  bucket     = aws_s3_bucket.airflow.id
  key        = "requirements.txt"
  source     = "${path.module}/requirements.txt"
  etag       = filemd5("${path.module}/requirements.txt")
  kms_key_id = var.kms_key_arn
}

resource "aws_s3_object" "startup" {
  bucket = aws_s3_bucket.airflow.id
  key    = "startup.sh"
  content = templatefile("${path.module}/startup.sh.tftpl", {
    settings = var.settings_env
    secrets  = var.secret_env
  })
  kms_key_id = var.kms_key_arn
}

resource "aws_security_group" "airflow" {
  name        = "${var.name}-mwaa"
  description = "MWAA workers, scheduler and web server"
  vpc_id      = var.vpc_id

  ingress {
    description = "Airflow components talk to each other"
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    self        = true
  }

  egress {
    description = "Airflow components talk to each other"
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    self        = true
  }

  egress {
    description = "AWS APIs over HTTPS (S3, SQS, CloudWatch, EMR Serverless, Secrets Manager)"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  egress {
    description = "MWAA's metadata database endpoint inside the VPC"
    from_port   = 5432
    to_port     = 5432
    protocol    = "tcp"
    cidr_blocks = [var.vpc_cidr]
  }
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["airflow.amazonaws.com", "airflow-env.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "execution" {
  statement {
    sid       = "PublishMetrics"
    actions   = ["airflow:PublishMetrics"]
    resources = [local.env_arn]
  }

  statement {
    sid       = "ReadDeployment"
    actions   = ["s3:GetObject*", "s3:GetBucket*", "s3:List*"]
    resources = [aws_s3_bucket.airflow.arn, "${aws_s3_bucket.airflow.arn}/*"]
  }

  statement {
    sid       = "DenyListingOtherBuckets"
    effect    = "Deny"
    actions   = ["s3:ListAllMyBuckets"]
    resources = [aws_s3_bucket.airflow.arn, "${aws_s3_bucket.airflow.arn}/*"]
  }

  statement {
    sid = "WriteOwnLogs"
    actions = [
      "logs:CreateLogStream", "logs:CreateLogGroup", "logs:PutLogEvents", "logs:GetLogEvents",
      "logs:GetLogRecord", "logs:GetLogGroupFields", "logs:GetQueryResults",
    ]
    resources = ["${local.arn}:logs:${local.region}:${local.account}:log-group:airflow-${var.name}-*"]
  }

  statement {
    sid       = "DescribeLogGroups"
    actions   = ["logs:DescribeLogGroups", "cloudwatch:PutMetricData"]
    resources = ["*"]
  }

  statement {
    sid = "CeleryQueue"
    actions = [
      "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:SendMessage",
    ]
    # The queue lives in an account MWAA owns, so the account is a wildcard.
    resources = ["${local.arn}:sqs:${local.region}:*:airflow-celery-*"]
  }

  statement {
    sid       = "UsePlatformKey"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey*", "kms:Encrypt"]
    resources = [var.kms_key_arn]
  }

  statement {
    sid       = "ReadPlatformCredentials"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = values(var.secret_env)[*].secret_arn
  }

  statement {
    sid = "RunSparkJobs"
    actions = [
      "emr-serverless:StartJobRun", "emr-serverless:GetJobRun", "emr-serverless:CancelJobRun",
      "emr-serverless:GetApplication", "emr-serverless:GetDashboardForJobRun",
    ]
    resources = [var.spark_application_arn, "${var.spark_application_arn}/jobruns/*"]
  }

  statement {
    sid       = "PassSparkJobRole"
    actions   = ["iam:PassRole"]
    resources = [var.spark_job_role_arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["emr-serverless.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name               = "${var.name}-mwaa"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "execution" {
  name   = "mwaa-execution"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}

resource "aws_mwaa_environment" "this" {
  name                             = var.name
  airflow_version                  = var.airflow_version
  environment_class                = var.environment_class
  min_workers                      = var.min_workers
  max_workers                      = var.max_workers
  execution_role_arn               = aws_iam_role.execution.arn
  kms_key                          = var.kms_key_arn
  source_bucket_arn                = aws_s3_bucket.airflow.arn
  dag_s3_path                      = "dags/"
  requirements_s3_path             = aws_s3_object.requirements.key
  requirements_s3_object_version   = aws_s3_object.requirements.version_id
  startup_script_s3_path           = aws_s3_object.startup.key
  startup_script_s3_object_version = aws_s3_object.startup.version_id
  webserver_access_mode            = "PRIVATE_ONLY"

  network_configuration {
    security_group_ids = [aws_security_group.airflow.id]
    subnet_ids         = slice(var.subnet_ids, 0, 2)
  }

  logging_configuration {
    dag_processing_logs {
      enabled   = true
      log_level = "INFO"
    }
    scheduler_logs {
      enabled   = true
      log_level = "INFO"
    }
    task_logs {
      enabled   = true
      log_level = "INFO"
    }
    webserver_logs {
      enabled   = true
      log_level = "WARNING"
    }
    worker_logs {
      enabled   = true
      log_level = "INFO"
    }
  }

  depends_on = [aws_s3_object.dags]
}
