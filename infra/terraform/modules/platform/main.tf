# The whole platform in one environment: every component module wired
# together, and the WAP_* settings that point the project's code at it.
# Environments (envs/dev, envs/prod) call this module with their sizing and
# create the Kafka topics next to it (the kafka provider needs the brokers).

data "aws_region" "current" {}

locals {
  region = data.aws_region.current.region

  # Delta commits to S3 through DynamoDB so concurrent writers cannot
  # overwrite each other's log entries.
  spark_conf = {
    "spark.delta.logStore.s3a.impl"                           = "io.delta.storage.S3DynamoDBLogStore"
    "spark.delta.logStore.s3.impl"                            = "io.delta.storage.S3DynamoDBLogStore"
    "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName" = module.lake.delta_log_table_name
    "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region"    = local.region
  }

  jars_uri = "s3://${module.lake.bucket_name}/${module.lake.prefixes.artifacts}/jars"

  # One entry per setting of core/settings.py, named as its environment
  # variable and rendered as pydantic-settings parses it: those the Spark jobs
  # read (job_settings_env) and the DAGs' runtime (batch_env).
  job_settings_env = {
    WAP_ENVIRONMENT                 = var.environment
    WAP_KAFKA__BOOTSTRAP_SERVERS    = module.kafka.bootstrap_brokers
    WAP_KAFKA__SECURITY_PROTOCOL    = "SASL_SSL"
    WAP_KAFKA__SASL_MECHANISM       = "SCRAM-SHA-512"
    WAP_KAFKA__SASL_USERNAME        = module.kafka.scram_username
    WAP_KAFKA__EVENTS_TOPIC         = var.platform_kafka.events_topic
    WAP_KAFKA__DLQ_TOPIC            = var.platform_kafka.dlq_topic
    WAP_KAFKA__PARTITIONS           = tostring(var.platform_kafka.partitions)
    WAP_KAFKA__REPLICATION_FACTOR   = tostring(var.platform_kafka.replication_factor)
    WAP_KAFKA__MIN_INSYNC_REPLICAS  = tostring(var.platform_kafka.min_insync_replicas)
    WAP_KAFKA__RETENTION_MS         = tostring(var.platform_kafka.retention_ms)
    WAP_CASSANDRA__CONTACT_POINTS   = jsonencode(module.cassandra.contact_points)
    WAP_CASSANDRA__PORT             = tostring(module.cassandra.port)
    WAP_CASSANDRA__SSL              = "true"
    WAP_CASSANDRA__KEYSPACE         = module.cassandra.keyspace
    WAP_CASSANDRA__REPLICATION      = jsonencode(module.cassandra.replication)
    WAP_CASSANDRA__LOCAL_DATACENTER = module.cassandra.local_datacenter
    WAP_CASSANDRA__USERNAME         = module.cassandra.username
    WAP_LAKE__ROOT                  = module.lake.lake_root
    WAP_LAKE__CHECKPOINT_ROOT       = module.lake.checkpoint_root
    WAP_SPARK__JARS                 = jsonencode([for jar in var.spark_jars : "${local.jars_uri}/${jar}"])
    WAP_SPARK__SHUFFLE_PARTITIONS   = tostring(var.spark_shuffle_partitions)
    WAP_SPARK__EXTRA_CONF           = jsonencode(local.spark_conf)
  }

  batch_env = {
    WAP_BATCH__RUNNER             = "emr_serverless"
    WAP_BATCH__EMR_APPLICATION_ID = module.spark.application_id
    WAP_BATCH__EMR_JOB_ROLE_ARN   = module.spark.job_role_arn
    WAP_BATCH__ARTIFACTS_URI      = "s3://${module.lake.bucket_name}/${module.lake.prefixes.artifacts}/${var.artifact_version}"
  }

  # The production speed job's deploy (platformctl speed-deploy): where it runs. Its logs
  # go to the application's own location (logs/spark/speed/, under the platform's key).
  speed_job_env = {
    WAP_SPEED_JOB__EMR_APPLICATION_ID = module.spark.speed_application_id
  }

  settings_env = merge(local.job_settings_env, local.batch_env, local.speed_job_env)

  # Settings that are secrets: never outputs, read from Secrets Manager.
  secret_env = {
    WAP_KAFKA__SASL_PASSWORD      = { secret_arn = module.kafka.scram_secret_arn, json_key = "password" }
    WAP_CASSANDRA__PASSWORD       = { secret_arn = module.cassandra.credentials_secret_arn, json_key = "password" }
    WAP_COLLECTOR__WRITE_KEYS     = { secret_arn = aws_secretsmanager_secret.app.arn, json_key = "collector_write_keys" }
    WAP_SERVING__API_TOKENS       = { secret_arn = aws_secretsmanager_secret.app.arn, json_key = "serving_api_tokens" }
    WAP_SQL__TOKEN                = { secret_arn = aws_secretsmanager_secret.app.arn, json_key = "sql_token" }
    WAP_MONITORING__METRICS_TOKEN = { secret_arn = aws_secretsmanager_secret.app.arn, json_key = "metrics_token" }
  }
}

module "kms" {
  source = "../kms"
  name   = var.name
}

module "network" {
  source             = "../network"
  name               = var.name
  cidr_block         = var.vpc_cidr
  availability_zones = var.availability_zones
  single_nat_gateway = var.single_nat_gateway
  kms_key_arn        = module.kms.key_arn
}

module "kafka" {
  source              = "../kafka"
  name                = var.name
  vpc_id              = module.network.vpc_id
  subnet_ids          = module.network.private_subnet_ids
  client_cidr         = module.network.vpc_cidr
  instance_type       = var.kafka_instance_type
  volume_size_gb      = var.kafka_volume_size_gb
  partitions          = var.platform_kafka.partitions
  replication_factor  = var.platform_kafka.replication_factor
  min_insync_replicas = var.platform_kafka.min_insync_replicas
  retention_ms        = var.platform_kafka.retention_ms
  kms_key_arn         = module.kms.key_arn
}

module "cassandra" {
  source        = "../cassandra"
  name          = var.name
  keyspace_name = var.keyspace_name
  kms_key_arn   = module.kms.key_arn
}

module "lake" {
  source      = "../lake"
  name        = var.name
  bucket_name = var.lake_bucket_name
  kms_key_arn = module.kms.key_arn
}

module "spark" {
  source     = "../spark"
  name       = var.name
  vpc_id     = module.network.vpc_id
  vpc_cidr   = module.network.vpc_cidr
  subnet_ids = module.network.private_subnet_ids
  max_cpu    = var.spark_max_cpu
  max_memory = var.spark_max_memory
  # The streaming speed job's own application and cap (speed_layer/emr.py sizes it).
  speed_max_cpu    = var.speed_max_cpu
  speed_max_memory = var.speed_max_memory
  # Every job run gets the settings as its driver's environment, and where to read the
  # secret ones (core/secrets.py); the DAGs' runtime settings are not the jobs'.
  spark_conf = merge(
    local.spark_conf,
    { for name, value in local.job_settings_env : "spark.emr-serverless.driverEnv.${name}" => value },
    { "spark.emr-serverless.driverEnv.WAP_SECRETS" = jsonencode(local.secret_env) },
  )
  bucket_name         = module.lake.bucket_name
  bucket_arn          = module.lake.bucket_arn
  prefixes            = module.lake.prefixes
  delta_log_table_arn = module.lake.delta_log_table_arn
  secret_arns         = distinct([for secret in values(local.secret_env) : secret.secret_arn])
  kms_key_arn         = module.kms.key_arn
}

module "airflow" {
  source                = "../airflow"
  name                  = var.name
  bucket_name           = var.airflow_bucket_name
  access_log_bucket     = module.lake.access_log_bucket
  dags_dir              = var.dags_dir
  environment_class     = var.airflow_environment_class
  max_workers           = var.airflow_max_workers
  vpc_id                = module.network.vpc_id
  vpc_cidr              = module.network.vpc_cidr
  subnet_ids            = module.network.private_subnet_ids
  kms_key_arn           = module.kms.key_arn
  settings_env          = local.settings_env
  secret_env            = local.secret_env
  spark_application_arn = module.spark.application_arn
  spark_job_role_arn    = module.spark.job_role_arn
}

# Collector write keys and analysts' API tokens: created empty, filled by an
# operator (see README), read by every process at start-up.
resource "aws_secretsmanager_secret" "app" {
  # checkov:skip=CKV2_AWS_57: Write keys are handed to websites and tokens to analysts; rotating them is a coordinated change with those people, not an automatic one.
  name        = "${var.name}/app"
  description = "WAP_COLLECTOR__WRITE_KEYS, WAP_SERVING__API_TOKENS, WAP_SQL__TOKEN and WAP_MONITORING__METRICS_TOKEN as JSON keys collector_write_keys, serving_api_tokens, sql_token, metrics_token"
  kms_key_id  = module.kms.key_arn
}

# --- the long-running processes: ECS Fargate ------------------------------------
# The collector and serving. The streaming speed layer is not here: it runs on
# EMR Serverless (module.spark, `platformctl speed-deploy`), where it scales
# past one machine and is restarted from its checkpoint when it fails.

resource "aws_ecs_cluster" "this" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

locals {
  service_common = {
    cluster_arn  = aws_ecs_cluster.this.arn
    image        = var.container_image
    vpc_id       = module.network.vpc_id
    vpc_cidr     = module.network.vpc_cidr
    subnet_ids   = module.network.private_subnet_ids
    settings_env = local.settings_env
    secret_env   = local.secret_env
    kms_key_arn  = module.kms.key_arn
  }
}

# Websites' browsers and servers send their events here: internet-facing.
module "collector" {
  source            = "../service"
  name              = "${var.name}-collector"
  command           = ["python", "-m", "ingest"]
  port              = 8088
  cpu               = 1024
  memory            = 2048
  environment       = { WAP_COLLECTOR__WORKERS = "1" } # one process per vCPU of the task
  min_tasks         = var.collector_tasks.min
  max_tasks         = var.collector_tasks.max
  load_balanced     = true
  public            = true
  lb_subnet_ids     = module.network.public_subnet_ids
  lb_ingress_cidrs  = ["0.0.0.0/0"]
  certificate_arn   = var.certificate_arn
  access_log_bucket = module.lake.access_log_bucket
  platform          = local.service_common
}

# Analysts and dashboards: an internal load balancer.
module "serving" {
  source            = "../service"
  name              = "${var.name}-serving"
  command           = ["python", "-m", "serving", "serve"]
  port              = 8090
  cpu               = 1024
  memory            = 2048
  environment       = { WAP_SERVING__WORKERS = "1" } # one process per vCPU of the task
  min_tasks         = var.serving_tasks.min
  max_tasks         = var.serving_tasks.max
  load_balanced     = true
  public            = false
  lb_subnet_ids     = module.network.private_subnet_ids
  lb_ingress_cidrs  = var.analyst_cidrs
  certificate_arn   = var.certificate_arn
  access_log_bucket = module.lake.access_log_bucket
  platform          = local.service_common
}
