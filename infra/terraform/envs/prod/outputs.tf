# Outputs named WAP_* are settings of core/settings.py, one each, under the
# name of their environment variable (see README, "Settings from outputs").
# Passwords are never outputs: see secret_settings.

output "WAP_ENVIRONMENT" {
  description = "Which deployment this is."
  value       = module.platform.settings_env["WAP_ENVIRONMENT"]
}

output "WAP_KAFKA__BOOTSTRAP_SERVERS" {
  description = "MSK brokers, SASL/SCRAM over TLS."
  value       = module.platform.settings_env["WAP_KAFKA__BOOTSTRAP_SERVERS"]
}

output "WAP_KAFKA__SECURITY_PROTOCOL" {
  description = "Listener protocol of the MSK brokers."
  value       = module.platform.settings_env["WAP_KAFKA__SECURITY_PROTOCOL"]
}

output "WAP_KAFKA__SASL_MECHANISM" {
  description = "SASL mechanism of the MSK brokers."
  value       = module.platform.settings_env["WAP_KAFKA__SASL_MECHANISM"]
}

output "WAP_KAFKA__SASL_USERNAME" {
  description = "SCRAM user; the password is in Secrets Manager."
  value       = module.platform.settings_env["WAP_KAFKA__SASL_USERNAME"]
}

output "WAP_KAFKA__EVENTS_TOPIC" {
  description = "Topic of validated events."
  value       = module.platform.settings_env["WAP_KAFKA__EVENTS_TOPIC"]
}

output "WAP_KAFKA__DLQ_TOPIC" {
  description = "Dead-letter topic."
  value       = module.platform.settings_env["WAP_KAFKA__DLQ_TOPIC"]
}

output "WAP_KAFKA__PARTITIONS" {
  description = "Partitions of the platform's topics."
  value       = module.platform.settings_env["WAP_KAFKA__PARTITIONS"]
}

output "WAP_KAFKA__REPLICATION_FACTOR" {
  description = "Replicas per partition."
  value       = module.platform.settings_env["WAP_KAFKA__REPLICATION_FACTOR"]
}

output "WAP_KAFKA__MIN_INSYNC_REPLICAS" {
  description = "min.insync.replicas of the platform's topics."
  value       = module.platform.settings_env["WAP_KAFKA__MIN_INSYNC_REPLICAS"]
}

output "WAP_KAFKA__RETENTION_MS" {
  description = "Log retention: the reprocessing window."
  value       = module.platform.settings_env["WAP_KAFKA__RETENTION_MS"]
}

output "WAP_CASSANDRA__CONTACT_POINTS" {
  description = "Keyspaces endpoint (JSON list)."
  value       = module.platform.settings_env["WAP_CASSANDRA__CONTACT_POINTS"]
}

output "WAP_CASSANDRA__PORT" {
  description = "Keyspaces CQL port (TLS)."
  value       = module.platform.settings_env["WAP_CASSANDRA__PORT"]
}

output "WAP_CASSANDRA__SSL" {
  description = "Keyspaces requires TLS."
  value       = module.platform.settings_env["WAP_CASSANDRA__SSL"]
}

output "WAP_CASSANDRA__KEYSPACE" {
  description = "Keyspace of the platform's tables."
  value       = module.platform.settings_env["WAP_CASSANDRA__KEYSPACE"]
}

output "WAP_CASSANDRA__REPLICATION" {
  description = "Keyspace replication (JSON)."
  value       = module.platform.settings_env["WAP_CASSANDRA__REPLICATION"]
}

output "WAP_CASSANDRA__LOCAL_DATACENTER" {
  description = "Keyspaces data centre: the region."
  value       = module.platform.settings_env["WAP_CASSANDRA__LOCAL_DATACENTER"]
}

output "WAP_CASSANDRA__USERNAME" {
  description = "Keyspaces user; the password is in Secrets Manager."
  value       = module.platform.settings_env["WAP_CASSANDRA__USERNAME"]
}

output "WAP_LAKE__ROOT" {
  description = "Root of the Delta tables."
  value       = module.platform.settings_env["WAP_LAKE__ROOT"]
}

output "WAP_LAKE__CHECKPOINT_ROOT" {
  description = "Root of the streaming checkpoints."
  value       = module.platform.settings_env["WAP_LAKE__CHECKPOINT_ROOT"]
}

output "WAP_SPARK__JARS" {
  description = "Connector jars in the lake bucket (JSON list)."
  value       = module.platform.settings_env["WAP_SPARK__JARS"]
}

output "WAP_SPARK__SHUFFLE_PARTITIONS" {
  description = "spark.sql.shuffle.partitions."
  value       = module.platform.settings_env["WAP_SPARK__SHUFFLE_PARTITIONS"]
}

output "WAP_SPARK__EXTRA_CONF" {
  description = "Delta's DynamoDB log store settings (JSON map)."
  value       = module.platform.settings_env["WAP_SPARK__EXTRA_CONF"]
}

output "WAP_BATCH__RUNNER" {
  description = "The DAGs run each step as an EMR Serverless job run."
  value       = module.platform.settings_env["WAP_BATCH__RUNNER"]
}

output "WAP_BATCH__EMR_APPLICATION_ID" {
  description = "The EMR Serverless application the steps run on."
  value       = module.platform.settings_env["WAP_BATCH__EMR_APPLICATION_ID"]
}

output "WAP_BATCH__EMR_JOB_ROLE_ARN" {
  description = "The role the steps' job runs run as."
  value       = module.platform.settings_env["WAP_BATCH__EMR_JOB_ROLE_ARN"]
}

output "WAP_BATCH__ARTIFACTS_URI" {
  description = "Where `python -m platformctl package` output is uploaded (one folder per version)."
  value       = module.platform.settings_env["WAP_BATCH__ARTIFACTS_URI"]
}

output "WAP_SPEED_JOB__EMR_APPLICATION_ID" {
  description = "The EMR Serverless application the streaming speed job runs on."
  value       = module.platform.settings_env["WAP_SPEED_JOB__EMR_APPLICATION_ID"]
}

output "secret_settings" {
  description = "WAP_* password settings -> Secrets Manager secret and JSON key."
  value       = module.platform.secret_settings
}

output "spark_application_id" {
  description = "EMR Serverless application jobs are submitted to."
  value       = module.platform.spark_application_id
}

output "speed_application_id" {
  description = "EMR Serverless application of the streaming speed job."
  value       = module.platform.speed_application_id
}

output "speed_deployer_policy_arn" {
  description = "IAM policy for whoever runs `platformctl speed-deploy`."
  value       = module.platform.speed_deployer_policy_arn
}

output "spark_job_role_arn" {
  description = "Execution role for job runs."
  value       = module.platform.spark_job_role_arn
}

output "collector_url" {
  description = "HTTPS address of the collector (point the websites' DNS name at it)."
  value       = module.platform.collector_url
}

output "serving_url" {
  description = "HTTPS address of serving's internal load balancer."
  value       = module.platform.serving_url
}

output "airflow_webserver_url" {
  description = "Private URL of the Airflow UI."
  value       = module.platform.airflow_webserver_url
}

output "lake_bucket" {
  description = "Lake bucket; jars and job code go under artifacts/."
  value       = module.platform.lake_bucket
}

output "lake_gold_reader_policy_arn" {
  description = "IAM policy reading only the lake's gold tables (for analysts' direct readers)."
  value       = module.platform.lake_gold_reader_policy_arn
}

output "kafka_topics" {
  description = "Topics created on the cluster."
  value       = module.topics.topic_names
}
