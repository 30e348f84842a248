output "bucket_name" {
  description = "Name of the lake bucket."
  value       = aws_s3_bucket.lake.id
}

output "bucket_arn" {
  description = "ARN of the lake bucket."
  value       = aws_s3_bucket.lake.arn
}

output "prefixes" {
  description = "Key prefix of each area of the bucket: delta, checkpoints, artifacts, logs."
  value       = local.prefixes
}

output "lake_root" {
  description = "Root of the Delta tables, as Spark's S3A filesystem addresses it."
  value       = "s3a://${aws_s3_bucket.lake.id}/${local.prefixes.delta}"
}

output "checkpoint_root" {
  description = "Root of the streaming checkpoints."
  value       = "s3a://${aws_s3_bucket.lake.id}/${local.prefixes.checkpoints}"
}

output "delta_log_table_name" {
  description = "DynamoDB table of Delta's S3DynamoDBLogStore."
  value       = aws_dynamodb_table.delta_log.name
}

output "delta_log_table_arn" {
  description = "ARN of the DynamoDB table of Delta's S3DynamoDBLogStore."
  value       = aws_dynamodb_table.delta_log.arn
}

output "access_log_bucket" {
  description = "Bucket receiving S3 access logs of the platform's buckets."
  value       = aws_s3_bucket.access_logs.id
}

output "gold_reader_policy_arn" {
  description = "IAM policy reading the gold Delta tables only (delta/gold/): attach it to analysts' roles."
  value       = aws_iam_policy.gold_reader.arn
}

output "team_gold_reader_policy_arns" {
  description = "Per team, the IAM policy reading the gold tables of the pipelines it may read."
  value       = { for team, policy in aws_iam_policy.team_gold_reader : team => policy.arn }
}
