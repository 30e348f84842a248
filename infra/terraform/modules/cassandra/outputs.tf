output "contact_points" {
  description = "The regional Keyspaces endpoint, the driver's only contact point."
  value       = ["cassandra.${data.aws_region.current.region}.amazonaws.com"]
}

output "port" {
  description = "Keyspaces serves CQL over TLS on 9142 only."
  value       = 9142
}

output "local_datacenter" {
  description = "Keyspaces presents each region as one data centre named after it."
  value       = data.aws_region.current.region
}

output "keyspace" {
  description = "Name of the platform's keyspace."
  value       = aws_keyspaces_keyspace.this.name
}

output "replication" {
  description = "Keyspace replication as the settings express it (Keyspaces replicates across three zones itself)."
  value       = { class = "SingleRegionStrategy" }
}

output "username" {
  description = "User name of the service-specific credential (not secret)."
  value       = aws_iam_service_specific_credential.client.service_user_name
}

output "credentials_secret_arn" {
  description = "Secrets Manager secret holding the Keyspaces username and password."
  value       = aws_secretsmanager_secret.client.arn
}

output "table_names" {
  description = "Tables created in the keyspace."
  value       = sort(keys(aws_keyspaces_table.this))
}
