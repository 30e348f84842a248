# One environment of the platform. Sizing is in terraform.tfvars and, for
# Kafka, in kafka.auto.tfvars.json, from which `python -m
# infra.terraform.generate` writes topics.tf.json (local.platform_kafka and
# local.platform_topics) using the project's own topic declarations.

provider "aws" {
  region = var.region

  # Every resource carries the platform's standard tags (cost reports,
  # ownership, and which tool may change it).
  default_tags {
    tags = {
      project       = "web-activity-platform"
      environment   = var.environment
      owner         = var.owner
      "cost-center" = var.cost_center
      "managed-by"  = "terraform"
    }
  }
}

# Topics are created over the brokers' SASL/SCRAM listener, so `apply` must
# run from a host that can reach the VPC (see README, "Applying").
provider "kafka" {
  bootstrap_servers = split(",", module.platform.kafka_bootstrap_brokers)
  tls_enabled       = true
  sasl_mechanism    = "scram-sha512"
  sasl_username     = module.platform.kafka_scram_username
  sasl_password     = module.platform.kafka_scram_password
}

module "platform" {
  source = "../../modules/platform"

  name                      = "wap-${var.environment}"
  environment               = var.environment
  availability_zones        = var.availability_zones
  vpc_cidr                  = var.vpc_cidr
  single_nat_gateway        = var.single_nat_gateway
  platform_kafka            = local.platform_kafka
  kafka_instance_type       = var.kafka_instance_type
  kafka_volume_size_gb      = var.kafka_volume_size_gb
  keyspace_name             = var.keyspace_name
  lake_bucket_name          = var.lake_bucket_name
  airflow_bucket_name       = var.airflow_bucket_name
  spark_max_cpu             = var.spark_max_cpu
  spark_max_memory          = var.spark_max_memory
  spark_shuffle_partitions  = var.spark_shuffle_partitions
  speed_max_cpu             = var.speed_max_cpu
  speed_max_memory          = var.speed_max_memory
  spark_jars                = var.spark_jars
  airflow_environment_class = var.airflow_environment_class
  airflow_max_workers       = var.airflow_max_workers
  dags_dir                  = "${path.root}/../../../../dags"
  container_image           = var.container_image
  certificate_arn           = var.certificate_arn
  analyst_cidrs             = var.analyst_cidrs
  collector_tasks           = var.collector_tasks
  serving_tasks             = var.serving_tasks
}

module "topics" {
  source     = "../../modules/kafka_topics"
  topics     = local.platform_topics
  depends_on = [module.platform]
}

# topics.tf.json is generated from kafka.auto.tfvars.json; refuse to plan
# when the two disagree (sizing edited or overridden without regenerating).
resource "terraform_data" "topics_match_kafka_sizing" {
  lifecycle {
    precondition {
      condition = alltrue([
        for key, value in var.kafka : local.platform_kafka[key] == value
      ])
      error_message = "topics.tf.json was generated for other Kafka sizing than var.kafka: run `python -m infra.terraform.generate` and commit the result."
    }
  }
}
