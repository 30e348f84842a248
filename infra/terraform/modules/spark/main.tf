# EMR Serverless runs the platform's Spark jobs on two applications of one
# release: the batch layer's bronze/silver/gold runs that Airflow submits, and
# the streaming speed layer, one job run in streaming mode that `platformctl
# speed-deploy` keeps alive. Each application has its own capacity cap, so a
# backfill cannot take the executors the live views need. Both run as one job
# role, which may touch only the lake bucket's own prefixes, Delta's log table
# and the two credential secrets.

resource "aws_security_group" "jobs" {
  # checkov:skip=CKV2_AWS_5: Attached to the EMR Serverless application's network_configuration below, a reference checkov's graph does not follow.
  name        = "${var.name}-spark"
  description = "Spark drivers and executors: out to Kafka, Keyspaces and AWS APIs only"
  vpc_id      = var.vpc_id

  egress {
    description = "Kafka brokers (SASL/SCRAM over TLS) inside the VPC"
    from_port   = 9096
    to_port     = 9096
    protocol    = "tcp"
    cidr_blocks = [var.vpc_cidr]
  }

  egress {
    description = "Keyspaces endpoint (CQL over TLS) inside the VPC"
    from_port   = 9142
    to_port     = 9142
    protocol    = "tcp"
    cidr_blocks = [var.vpc_cidr]
  }

  egress {
    description = "AWS APIs over HTTPS (S3, DynamoDB, STS, Secrets Manager)"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  egress {
    description = "Shuffle and block transfer between the job's own workers"
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    self        = true
  }
}

resource "aws_emrserverless_application" "this" {
  name          = var.name
  release_label = var.release_label
  type          = "spark"
  architecture  = var.architecture

  maximum_capacity {
    cpu    = var.max_cpu
    memory = var.max_memory
  }

  auto_start_configuration {
    enabled = true
  }

  auto_stop_configuration {
    enabled              = true
    idle_timeout_minutes = var.idle_timeout_minutes
  }

  network_configuration {
    subnet_ids         = var.subnet_ids
    security_group_ids = [aws_security_group.jobs.id]
  }

  # Every job run on the application gets the lake's Delta settings.
  runtime_configuration {
    classification = "spark-defaults"
    properties     = var.spark_conf
  }

  monitoring_configuration {
    s3_monitoring_configuration {
      log_uri            = "s3://${var.bucket_name}/${var.prefixes.logs}/spark/"
      encryption_key_arn = var.kms_key_arn
    }
  }
}

# The streaming speed job: one long-lived job run (mode STREAMING, restarted by
# its retry policy from its checkpoint under checkpoints/), capped apart from
# the batch runs. Its executors follow the topic's partitions (dynamic
# allocation, speed_layer/emr.py); the cap leaves room for that many.
resource "aws_emrserverless_application" "speed" {
  name          = "${var.name}-speed"
  release_label = var.release_label
  type          = "spark"
  architecture  = var.architecture

  maximum_capacity {
    cpu    = var.speed_max_cpu
    memory = var.speed_max_memory
  }

  auto_start_configuration {
    enabled = true
  }

  # A streaming run keeps the application busy; it stops only when the job has
  # ended for good (retries spent) and nobody started it again.
  auto_stop_configuration {
    enabled              = true
    idle_timeout_minutes = var.idle_timeout_minutes
  }

  network_configuration {
    subnet_ids         = var.subnet_ids
    security_group_ids = [aws_security_group.jobs.id]
  }

  runtime_configuration {
    classification = "spark-defaults"
    properties     = var.spark_conf
  }

  monitoring_configuration {
    s3_monitoring_configuration {
      log_uri            = "s3://${var.bucket_name}/${var.prefixes.logs}/spark/speed/"
      encryption_key_arn = var.kms_key_arn
    }
  }
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["emr-serverless.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [aws_emrserverless_application.this.arn, aws_emrserverless_application.speed.arn]
    }
  }
}

data "aws_iam_policy_document" "job" {
  statement {
    sid       = "ListLakePrefixes"
    actions   = ["s3:ListBucket", "s3:GetBucketLocation"]
    resources = [var.bucket_arn]
  }

  # checkpoints/: the speed job's streaming state and offsets, resumed by every
  # attempt and by a replacement run.
  statement {
    sid     = "ReadWriteTablesAndCheckpoints"
    actions = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = [
      "${var.bucket_arn}/${var.prefixes.delta}/*",
      "${var.bucket_arn}/${var.prefixes.checkpoints}/*",
    ]
  }

  statement {
    sid       = "ReadJobArtifacts"
    actions   = ["s3:GetObject"]
    resources = ["${var.bucket_arn}/${var.prefixes.artifacts}/*"]
  }

  statement {
    sid       = "WriteSparkLogs"
    actions   = ["s3:PutObject"]
    resources = ["${var.bucket_arn}/${var.prefixes.logs}/spark/*"]
  }

  statement {
    sid       = "DeltaMultiWriterLog"
    actions   = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:DescribeTable"]
    resources = [var.delta_log_table_arn]
  }

  statement {
    sid       = "ReadPlatformCredentials"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = var.secret_arns
  }

  statement {
    sid       = "UsePlatformKey"
    actions   = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    resources = [var.kms_key_arn]
  }
}

resource "aws_iam_role" "job" {
  name               = "${var.name}-spark-job"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "job" {
  name   = "platform-job"
  role   = aws_iam_role.job.id
  policy = data.aws_iam_policy_document.job.json
}

# Whoever keeps the speed job running (`platformctl speed-deploy`, from CI or an
# operator's role): list, start, watch and cancel runs of the speed application
# only, passing only the job role. Airflow's role cannot touch it.
data "aws_iam_policy_document" "speed_deployer" {
  statement {
    sid = "RunTheSpeedJob"
    actions = [
      "emr-serverless:ListJobRuns", "emr-serverless:StartJobRun", "emr-serverless:GetJobRun",
      "emr-serverless:CancelJobRun", "emr-serverless:GetApplication",
      "emr-serverless:GetDashboardForJobRun",
    ]
    resources = [aws_emrserverless_application.speed.arn, "${aws_emrserverless_application.speed.arn}/jobruns/*"]
  }

  statement {
    sid       = "PassSparkJobRole"
    actions   = ["iam:PassRole"]
    resources = [aws_iam_role.job.arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["emr-serverless.amazonaws.com"]
    }
  }
}

resource "aws_iam_policy" "speed_deployer" {
  name        = "${var.name}-speed-deployer"
  description = "Start, watch, replace and cancel the streaming speed job on its EMR Serverless application"
  policy      = data.aws_iam_policy_document.speed_deployer.json
}
