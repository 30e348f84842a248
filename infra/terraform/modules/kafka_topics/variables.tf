variable "topics" {
  description = "Topic name -> partitions, replication factor and topic configs (from ingest/topics.py)."
  type = map(object({
    partitions         = number
    replication_factor = number
    config             = map(string)
  }))

  validation {
    condition     = alltrue([for topic in values(var.topics) : topic.replication_factor >= 3])
    error_message = "Production topics are replicated at least three times."
  }
}
