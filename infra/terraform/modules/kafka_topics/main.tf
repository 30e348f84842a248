# The platform's topics on the cluster. Which topics exist and how they are
# configured is decided by ingest/topics.py; the environment passes them in
# from its generated topics.tf.json, so Terraform and the code that creates
# topics locally cannot disagree.

resource "kafka_topic" "this" {
  for_each           = var.topics
  name               = each.key
  partitions         = each.value.partitions
  replication_factor = each.value.replication_factor
  config             = each.value.config
}
