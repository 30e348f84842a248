variable "name" {
  description = "Name prefix of the environment, e.g. wap-prod."
  type        = string
}

variable "bucket_name" {
  description = "Globally unique name of the lake bucket; access logs go to <name>-access-logs."
  type        = string
}

variable "kms_key_arn" {
  description = "Customer-managed key encrypting lake objects and the Delta log table."
  type        = string
}

variable "noncurrent_version_days" {
  description = "Days an overwritten or vacuumed object version is kept before it expires."
  type        = number
  default     = 30
}

variable "intelligent_tiering_after_days" {
  description = "Age after which Delta data files move to S3 Intelligent-Tiering."
  type        = number
  default     = 30
}

variable "log_retention_days" {
  description = "Days Spark event logs and bucket access logs are kept."
  type        = number
  default     = 365
}
