variable "name" {
  description = "Name prefix of the environment, e.g. wap-prod."
  type        = string
}

variable "cidr_block" {
  description = "CIDR of the VPC; private subnets take /20s (for a /16), public ones /24s."
  type        = string
}

variable "availability_zones" {
  description = "Exactly three availability zones: MSK spreads one broker per zone."
  type        = list(string)

  validation {
    condition     = length(var.availability_zones) == 3
    error_message = "Give exactly three availability zones (one Kafka broker each)."
  }
}

variable "single_nat_gateway" {
  description = "One NAT gateway for all zones (cheaper, for dev) instead of one per zone."
  type        = bool
  default     = false
}

variable "kms_key_arn" {
  description = "Customer-managed key encrypting the flow-log group."
  type        = string
}

variable "log_retention_days" {
  description = "Days the VPC flow logs are kept."
  type        = number
  default     = 365
}
