# Example values for a development environment: small brokers, one NAT
# gateway, a low Spark ceiling. Kafka sizing lives in kafka.auto.tfvars.json.
region             = "eu-west-1"
environment        = "dev"
owner              = "data-platform"
cost_center        = "analytics-dev"
availability_zones = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
vpc_cidr           = "10.41.0.0/16"
single_nat_gateway = true

kafka_instance_type  = "kafka.t3.small"
kafka_volume_size_gb = 100

keyspace_name       = "web_activity"
lake_bucket_name    = "acme-wap-dev-lake"
airflow_bucket_name = "airflow-acme-wap-dev"

spark_max_cpu            = "16 vCPU"
spark_max_memory         = "64 GB"
spark_shuffle_partitions = 8
# The streaming speed job (its own application): a 2 vCPU driver and executors of
# 4 vCPU / 16 GB, one per 4 partitions of the topic (kafka.auto.tfvars.json), with room
# for the memory overhead.
speed_max_cpu    = "8 vCPU"
speed_max_memory = "48 GB"
spark_jars = [
  "delta-spark_4.1_2.13-4.4.0.jar",
  "delta-storage-4.4.0.jar",
  "delta-storage-s3-dynamodb-4.4.0.jar",
  "spark-sql-kafka-0-10_2.13-4.1.3.jar",
  "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
  "kafka-clients-3.9.1.jar",
  "commons-pool2-2.12.1.jar",
]

airflow_environment_class = "mw1.small"
airflow_max_workers       = 2

container_image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/web-activity-platform:0.1.0"
certificate_arn = "arn:aws:acm:eu-west-1:123456789012:certificate/00000000-0000-0000-0000-000000000001"
analyst_cidrs   = ["10.0.0.0/8"]
collector_tasks = { min = 1, max = 2 }
serving_tasks   = { min = 1, max = 1 }
