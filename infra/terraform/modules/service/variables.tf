variable "name" {
  description = "Name of the service and prefix of its resources, e.g. wap-prod-collector."
  type        = string
}

variable "platform" {
  description = "What every service of the platform shares: the ECS cluster, the project's image, the network, the WAP_* settings (secret ones as {secret_arn, json_key} in Secrets Manager) and the KMS key."
  type = object({
    cluster_arn  = string
    image        = string
    vpc_id       = string
    vpc_cidr     = string
    subnet_ids   = list(string)
    settings_env = map(string)
    secret_env   = map(object({ secret_arn = string, json_key = string }))
    kms_key_arn  = string
  })
}

variable "environment" {
  description = "WAP_* settings of this service alone, over the platform's (e.g. its worker processes, sized to its task's vCPUs)."
  type        = map(string)
  default     = {}
}

variable "command" {
  description = "The container's command, e.g. [\"python\", \"-m\", \"ingest\"]."
  type        = list(string)
}

variable "port" {
  description = "Port the container listens on (its /health and /metrics too)."
  type        = number
}

variable "cpu" {
  description = "Fargate task CPU units (1024 = one vCPU)."
  type        = number
}

variable "memory" {
  description = "Fargate task memory, MiB."
  type        = number
}

variable "min_tasks" {
  description = "Tasks always running (and the desired count at creation)."
  type        = number
}

variable "max_tasks" {
  description = "Most tasks autoscaling may run; equal to min_tasks for a service that must not scale (the speed layer)."
  type        = number
}

variable "cpu_target_percent" {
  description = "Target average CPU of the service's tasks for autoscaling."
  type        = number
  default     = 60
}

variable "load_balanced" {
  description = "Put the service behind an HTTPS Application Load Balancer (the collector, serving); false for a worker (the speed layer)."
  type        = bool
}

variable "public" {
  description = "Internet-facing load balancer (the collector takes browsers' calls); false: internal."
  type        = bool
  default     = false
}

variable "lb_subnet_ids" {
  description = "Subnets of the load balancer: public ones for an internet-facing one."
  type        = list(string)
  default     = []
}

variable "lb_ingress_cidrs" {
  description = "Who may reach the load balancer (0.0.0.0/0 for the collector)."
  type        = list(string)
  default     = []
}

variable "certificate_arn" {
  description = "ACM certificate of the load balancer's HTTPS listener."
  type        = string
  default     = null
}

variable "access_log_bucket" {
  description = "Bucket receiving the load balancer's access logs (under alb/<name>/)."
  type        = string
  default     = null
}

variable "log_retention_days" {
  description = "Retention of the service's CloudWatch logs."
  type        = number
  default     = 365
}

variable "task_policy_json" {
  description = "Extra IAM policy of the task role (the speed layer's lake and checkpoint access); null for none."
  type        = string
  default     = null
}
