variable "region" {
  description = "AWS region of the environment."
  type        = string
}

variable "environment" {
  description = "dev or prod: names resources and becomes WAP_ENVIRONMENT."
  type        = string
}

variable "owner" {
  description = "Team owning the environment (the owner tag)."
  type        = string
}

variable "cost_center" {
  description = "Cost centre billed for the environment (the cost-center tag)."
  type        = string
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
  description = "One NAT gateway for all zones instead of one per zone."
  type        = bool
}

variable "kafka" {
  description = "Kafka sizing (kafka.auto.tfvars.json), the input of the generated topics.tf.json."
  type = object({
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
  description = "vCPU ceiling of the EMR Serverless application."
  type        = string
}

variable "spark_max_memory" {
  description = "Memory ceiling of the EMR Serverless application."
  type        = string
}

variable "speed_max_cpu" {
  description = "vCPU ceiling of the streaming speed job's EMR Serverless application."
  type        = string
}

variable "speed_max_memory" {
  description = "Memory ceiling of the streaming speed job's EMR Serverless application."
  type        = string
}

variable "spark_shuffle_partitions" {
  description = "spark.sql.shuffle.partitions of the platform's jobs."
  type        = number
}

variable "spark_jars" {
  description = "Connector jar file names uploaded under <lake bucket>/artifacts/jars/."
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

variable "container_image" {
  description = "The project's container image (ECR URI with a tag) for the collector and serving."
  type        = string
}

variable "certificate_arn" {
  description = "ACM certificate of the collector's and serving's HTTPS load balancers."
  type        = string
}

variable "analyst_cidrs" {
  description = "Networks that may reach serving's internal load balancer."
  type        = list(string)
}

variable "collector_tasks" {
  description = "Least and most collector tasks."
  type        = object({ min = number, max = number })
}

variable "serving_tasks" {
  description = "Least and most serving tasks."
  type        = object({ min = number, max = number })
}
