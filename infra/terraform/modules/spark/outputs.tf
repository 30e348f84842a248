output "application_id" {
  description = "ID of the EMR Serverless application the batch steps are submitted to."
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

output "speed_application_id" {
  description = "ID of the EMR Serverless application the streaming speed job runs on."
  value       = aws_emrserverless_application.speed.id
}

output "speed_deployer_policy_arn" {
  description = "IAM policy to attach to whoever runs `platformctl speed-deploy` (CI, operators)."
  value       = aws_iam_policy.speed_deployer.arn
}
