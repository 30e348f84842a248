output "application_id" {
  description = "ID of the EMR Serverless application jobs are submitted to."
  value       = aws_emrserverless_application.this.id
}

output "application_arn" {
  description = "ARN of the EMR Serverless application."
  value       = aws_emrserverless_application.this.arn
}

output "job_role_arn" {
  description = "Execution role of the platform's job runs."
  value       = aws_iam_role.job.arn
}
