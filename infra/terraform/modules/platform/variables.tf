variable "name" {
  description = "Name prefix of every resource, e.g. wap-prod."
  type        = string
}

variable "environment" {
  description = "Which deployment this is (WAP_ENVIRONMENT): dev or prod."
  type        = string

  validation {
    condition     = contains(["dev", "prod"], var.environment)
    error_message = "environment must be dev or prod (the settings' non-local environments)."
  }
}

variable "availability_zones" {
  description = "Three availability zones of the region."
  type        = list(string)
}

variable "vpc_cidr" {
  description = "CIDR of the platform's VPC."
  type        = string
}

variable "single_nat_gateway" {
  description = "One NAT gateway for all zones (dev) instead of one per zone (prod)."
  type        = bool
}

variable "platform_kafka" {
  description = "Topic names and sizing from the environment's generated topics.tf.json."
  type = object({
    events_topic        = string
    dlq_topic           = string
    partitions          = number
    replication_factor  = number
    min_insync_replicas = number
    retention_ms        = number
  })
}

variable "kafka_instance_type" {
  description = "MSK broker instance type."
  type        = string
}

variable "kafka_volume_size_gb" {
  description = "EBS storage per broker in GB."
  type        = number
}

variable "keyspace_name" {
  description = "Keyspace of the platform's tables."
  type        = string
}

variable "lake_bucket_name" {
  description = "Globally unique name of the lake bucket."
  type        = string
}

variable "airflow_bucket_name" {
  description = "Globally unique name of the MWAA bucket."
  type        = string
}

variable "spark_max_cpu" {
  description = "vCPU ceiling of the batch steps' EMR Serverless application, e.g. \"64 vCPU\"."
  type        = string
}

variable "spark_max_memory" {
  description = "Memory ceiling of the batch steps' EMR Serverless application, e.g. \"256 GB\"."
  type        = string
}

variable "speed_max_cpu" {
  description = "vCPU ceiling of the streaming speed job's EMR Serverless application, e.g. \"16 vCPU\": its driver plus one executor per executor_cores partitions."
  type        = string
}

variable "speed_max_memory" {
  description = "Memory ceiling of the streaming speed job's EMR Serverless application, e.g. \"96 GB\"."
  type        = string
}

variable "spark_shuffle_partitions" {
  description = "spark.sql.shuffle.partitions of the platform's jobs."
  type        = number
}

variable "artifact_version" {
  description = "The version folder under artifacts/ the batch steps run from (`python -m platformctl package` output, uploaded)."
  type        = string
  default     = "0.1.0"
}

variable "spark_jars" {
  description = "Connector jar file names uploaded under <lake bucket>/artifacts/jars/ (WAP_SPARK__JARS)."
  type        = list(string)
}

variable "airflow_environment_class" {
  description = "MWAA environment class."
  type        = string
}

variable "airflow_max_workers" {
  description = "Most MWAA workers under load."
  type        = number
}

variable "dags_dir" {
  description = "The project's dags/ folder."
  type        = string
}

variable "container_image" {
  description = "The project's container image (the wheel from `platformctl package`, its requirements and a Java 17 runtime) the collector and serving run."
  type        = string
}

variable "certificate_arn" {
  description = "ACM certificate of the collector's and serving's HTTPS load balancers."
  type        = string
}

variable "analyst_cidrs" {
  description = "Networks that may reach serving's internal load balancer (analysts, dashboards)."
  type        = list(string)
}

variable "collector_tasks" {
  description = "Least and most collector tasks (autoscaled on CPU between them)."
  type        = object({ min = number, max = number })
}

variable "serving_tasks" {
  description = "Least and most serving tasks (autoscaled on CPU between them)."
  type        = object({ min = number, max = number })
}
