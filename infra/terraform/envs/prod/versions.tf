terraform {
  required_version = ">= 1.10.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 6.0"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.6"
    }
    kafka = {
      source  = "Mongey/kafka"
      version = "~> 0.12"
    }
  }

  # State holds generated passwords: keep it in an encrypted, versioned
  # bucket with locking. Fill in with `terraform init -backend-config=...`.
  backend "s3" {
    encrypt      = true
    use_lockfile = true
  }
}
