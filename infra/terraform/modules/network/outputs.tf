output "vpc_id" {
  description = "ID of the platform's VPC."
  value       = aws_vpc.this.id
}

output "vpc_cidr" {
  description = "CIDR of the VPC (clients of Kafka and Keyspaces live inside it)."
  value       = aws_vpc.this.cidr_block
}

output "private_subnet_ids" {
  description = "Private subnets, one per availability zone, in the zones' order."
  value       = aws_subnet.private[*].id
}

output "public_subnet_ids" {
  description = "Public subnets (internet-facing load balancers)."
  value       = aws_subnet.public[*].id
}
