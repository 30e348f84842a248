variable "name" {
  description = "Name of the MWAA environment, e.g. wap-prod."
  type        = string
}

variable "bucket_name" {
  description = "Globally unique name of the bucket holding dags/, requirements and the startup script."
  type        = string
}

variable "access_log_bucket" {
  description = "Bucket receiving this bucket's access logs."
  type        = string
}

variable "dags_dir" {
  description = "The project's dags/ folder, uploaded as the environment's DAGs."
  type        = string
}

variable "airflow_version" {
  description = "Airflow version of the environment: an Airflow 3 release MWAA offers."
  type        = string
  default     = "3.0.6"
}

variable "environment_class" {
  description = "MWAA environment class: mw1.small (dev) to mw1.large."
  type        = string
}

variable "min_workers" {
  description = "Workers always running."
  type        = number
  default     = 1
}

variable "max_workers" {
  description = "Upper bound of workers under load."
  type        = number
}

variable "vpc_id" {
  description = "VPC of the environment."
  type        = string
}

variable "vpc_cidr" {
  description = "CIDR of the VPC."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets; MWAA uses the first two (two availability zones)."
  type        = list(string)
}

variable "kms_key_arn" {
  description = "Customer-managed key of the environment, its bucket and logs."
  type        = string
}

variable "settings_env" {
  description = "Non-secret WAP_* settings exported to every Airflow process."
  type        = map(string)
}

variable "secret_env" {
  description = "WAP_* password settings -> the secret and JSON key they are read from at start-up."
  type = map(object({
    secret_arn = string
    json_key   = string
  }))
}

variable "spark_application_arn" {
  description = "EMR Serverless application the DAGs submit jobs to."
  type        = string
}

variable "spark_job_role_arn" {
  description = "Execution role the DAGs pass to job runs."
  type        = string
}
