output "webserver_url" {
  description = "Private URL of the Airflow UI (reachable from inside the VPC)."
  value       = aws_mwaa_environment.this.webserver_url
}

output "bucket_name" {
  description = "Bucket of the environment's DAGs, requirements and startup script."
  value       = aws_s3_bucket.airflow.id
}

output "execution_role_arn" {
  description = "Execution role of the MWAA environment."
  value       = aws_iam_role.execution.arn
}
