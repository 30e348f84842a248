output "settings_env" {
  description = "WAP_* variable -> value of every non-secret setting the platform determines."
  value       = local.settings_env
}

output "secret_settings" {
  description = "WAP_* password settings -> the Secrets Manager secret and JSON key holding them."
  value       = local.secret_env
}

output "kafka_bootstrap_brokers" {
  description = "SASL/SCRAM over TLS bootstrap brokers."
  value       = module.kafka.bootstrap_brokers
}

output "kafka_scram_username" {
  description = "SASL/SCRAM user of the platform."
  value       = module.kafka.scram_username
}

output "kafka_scram_password" {
  description = "SASL/SCRAM password, only for the kafka provider of the environment root."
  value       = module.kafka.scram_password
  sensitive   = true
}

output "spark_application_id" {
  description = "EMR Serverless application the batch steps are submitted to."
  value       = module.spark.application_id
}

output "speed_application_id" {
  description = "EMR Serverless application of the streaming speed job (platformctl speed-deploy)."
  value       = module.spark.speed_application_id
}

output "speed_deployer_policy_arn" {
  description = "IAM policy for whoever runs `platformctl speed-deploy` (attach it to CI's or the operators' role)."
  value       = module.spark.speed_deployer_policy_arn
}

output "spark_job_role_arn" {
  description = "Execution role for job runs."
  value       = module.spark.job_role_arn
}

output "airflow_webserver_url" {
  description = "Private URL of the Airflow UI."
  value       = module.airflow.webserver_url
}

output "lake_bucket" {
  description = "Bucket of the lake; upload jars and job code under artifacts/."
  value       = module.lake.bucket_name
}

output "lake_gold_reader_policy_arn" {
  description = "IAM policy reading only the lake's gold tables: attach it to analysts' roles."
  value       = module.lake.gold_reader_policy_arn
}

output "collector_url" {
  description = "HTTPS address of the collector's load balancer (point DNS for the websites here)."
  value       = module.collector.url
}

output "serving_url" {
  description = "HTTPS address of serving's internal load balancer."
  value       = module.serving.url
}

output "team_gold_reader_policy_arns" {
  description = "Per team, the IAM policy reading only the gold tables it is granted: attach each to its analysts' roles."
  value       = module.lake.team_gold_reader_policy_arns
}
