variable "name" {
  description = "Name prefix of the environment, e.g. wap-prod."
  type        = string
}

variable "vpc_id" {
  description = "VPC the jobs run in."
  type        = string
}

variable "vpc_cidr" {
  description = "CIDR of the VPC (where Kafka and the Keyspaces endpoint are)."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the job workers."
  type        = list(string)
}

variable "release_label" {
  description = "EMR release; the jobs need Spark 4 with Scala 2.13 (emr-spark-8.0.0 or later)."
  type        = string
  default     = "emr-spark-8.0.0"
}

variable "architecture" {
  description = "Worker CPU architecture: ARM64 (Graviton, cheaper) or X86_64."
  type        = string
  default     = "ARM64"
}

variable "max_cpu" {
  description = "Upper bound of vCPUs all running batch jobs may use together, e.g. \"64 vCPU\"."
  type        = string
}

variable "max_memory" {
  description = "Upper bound of memory all running batch jobs may use together, e.g. \"256 GB\"."
  type        = string
}

variable "speed_max_cpu" {
  description = "Upper bound of vCPUs of the streaming speed job's application (driver and executors), e.g. \"16 vCPU\"."
  type        = string
}

variable "speed_max_memory" {
  description = "Upper bound of memory of the streaming speed job's application, e.g. \"96 GB\"."
  type        = string
}

variable "idle_timeout_minutes" {
  description = "Minutes without jobs after which the application stops (and stops costing)."
  type        = number
  default     = 15
}

variable "spark_conf" {
  description = "spark-defaults for every job run (the Delta log store settings)."
  type        = map(string)
}

variable "bucket_name" {
  description = "Name of the lake bucket."
  type        = string
}

variable "bucket_arn" {
  description = "ARN of the lake bucket."
  type        = string
}

variable "prefixes" {
  description = "Key prefixes of the lake bucket (delta, checkpoints, artifacts, logs)."
  type        = map(string)
}

variable "delta_log_table_arn" {
  description = "ARN of the DynamoDB table of Delta's S3DynamoDBLogStore."
  type        = string
}

variable "secret_arns" {
  description = "Secrets the jobs read their Kafka and Keyspaces passwords from."
  type        = list(string)
}

variable "kms_key_arn" {
  description = "Customer-managed key of the lake, the secrets and the job logs."
  type        = string
}
