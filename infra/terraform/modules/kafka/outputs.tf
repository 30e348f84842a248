output "bootstrap_brokers" {
  description = "Comma-separated SASL/SCRAM over TLS bootstrap brokers (port 9096)."
  value       = aws_msk_cluster.this.bootstrap_brokers_sasl_scram
}

output "cluster_arn" {
  description = "ARN of the MSK cluster."
  value       = aws_msk_cluster.this.arn
}

output "scram_username" {
  description = "SASL/SCRAM user of the platform's clients."
  value       = var.scram_username
}

output "scram_secret_arn" {
  description = "Secrets Manager secret holding the SCRAM username and password."
  value       = aws_secretsmanager_secret.scram.arn
}

output "scram_password" {
  description = "The SCRAM password, only for configuring the kafka provider of the same root."
  value       = random_password.scram.result
  sensitive   = true
}
