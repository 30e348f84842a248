variable "name" {
  description = "Name of the MSK cluster, e.g. wap-prod."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the brokers."
  type        = string
}

variable "subnet_ids" {
  description = "One private subnet per availability zone; brokers are spread across them."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) == 3
    error_message = "MSK needs one subnet in each of three availability zones."
  }
}

variable "client_cidr" {
  description = "CIDR allowed to reach the brokers (the VPC)."
  type        = string
}

variable "kafka_version" {
  description = "Apache Kafka version of the MSK cluster."
  type        = string
  default     = "3.9.x"
}

variable "broker_count" {
  description = "Number of brokers: a multiple of the three availability zones."
  type        = number
  default     = 3

  validation {
    condition     = var.broker_count >= 3 && var.broker_count % 3 == 0
    error_message = "Use a multiple of three brokers (one per availability zone)."
  }
}

variable "instance_type" {
  description = "Broker instance type, e.g. kafka.t3.small (dev) or kafka.m7g.large (prod)."
  type        = string
}

variable "volume_size_gb" {
  description = "EBS storage per broker: peak ingest x retention x replication / brokers, plus headroom."
  type        = number
}

variable "partitions" {
  description = "Default partitions of a topic created without an explicit count."
  type        = number
}

variable "replication_factor" {
  description = "Default replication factor of topics (3 in production)."
  type        = number

  validation {
    condition     = var.replication_factor >= 3
    error_message = "Replication factor must be at least 3 on MSK (one copy per zone)."
  }
}

variable "min_insync_replicas" {
  description = "min.insync.replicas: with acks=all, writes survive the loss of one broker."
  type        = number

  validation {
    condition     = var.min_insync_replicas >= 2
    error_message = "min.insync.replicas must be at least 2 so an acknowledged write is on two brokers."
  }
}

variable "retention_ms" {
  description = "Default log retention: the window the batch layer can reprocess from the log."
  type        = number

  validation {
    condition     = var.retention_ms >= 86400000
    error_message = "Keep at least one day of log; the batch layer reprocesses from it."
  }
}

variable "scram_username" {
  description = "SASL/SCRAM user of the platform's clients (WAP_KAFKA__SASL_USERNAME)."
  type        = string
  default     = "platform"
}

variable "kms_key_arn" {
  description = "Customer-managed key for data at rest, broker logs and the SCRAM secret."
  type        = string
}

variable "log_retention_days" {
  description = "Days broker logs are kept in CloudWatch."
  type        = number
  default     = 365
}
