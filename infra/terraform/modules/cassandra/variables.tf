variable "name" {
  description = "Name prefix of the environment, e.g. wap-prod."
  type        = string
}

variable "keyspace_name" {
  description = "Keyspace of the platform's tables (WAP_CASSANDRA__KEYSPACE)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,47}$", var.keyspace_name))
    error_message = "Use lowercase letters, digits and '_', starting with a letter, at most 48 characters."
  }
}

variable "kms_key_arn" {
  description = "Customer-managed key encrypting the tables and the credentials secret."
  type        = string
}
