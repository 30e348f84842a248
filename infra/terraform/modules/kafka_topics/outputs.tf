output "topic_names" {
  description = "Names of the topics created on the cluster."
  value       = sort(keys(kafka_topic.this))
}
