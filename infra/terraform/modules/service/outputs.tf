output "service_name" {
  description = "Name of the ECS service."
  value       = aws_ecs_service.this.name
}

output "url" {
  description = "HTTPS address of the service's load balancer (null without one)."
  value       = var.load_balanced ? "https://${aws_lb.this[0].dns_name}" : null
}

output "task_role_arn" {
  description = "Role the service's containers run as."
  value       = aws_iam_role.task.arn
}
