output "key_arn" {
  description = "ARN of the environment's customer-managed key."
  value       = aws_kms_key.platform.arn
}
