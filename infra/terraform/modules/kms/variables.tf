variable "name" {
  description = "Name prefix of the environment, e.g. wap-prod."
  type        = string
}

variable "deletion_window_in_days" {
  description = "Days a scheduled key deletion can still be cancelled."
  type        = number
  default     = 30
}
