# One long-running process of the platform as an ECS Fargate service: the
# collector and serving behind an HTTPS Application Load Balancer (health
# checks on /health, autoscaling on CPU), the streaming speed layer as one
# task without one. Every task gets the platform's WAP_* settings as its
# environment and the secret ones from Secrets Manager, so it loads the same
# settings object as everywhere else.

data "aws_region" "current" {}

locals {
  lb_count = var.load_balanced ? 1 : 0
  environment = [
    for name, value in merge(var.platform.settings_env, var.environment) :
    { name = name, value = value }
  ]
  secrets = [
    for name, secret in var.platform.secret_env :
    { name = name, valueFrom = "${secret.secret_arn}:${secret.json_key}::" }
  ]
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.platform.kms_key_arn
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# The execution role: pulls the image, writes the logs, reads the secrets at start.
resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

data "aws_iam_policy_document" "secrets" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = distinct([for secret in values(var.platform.secret_env) : secret.secret_arn])
  }
  statement {
    actions   = ["kms:Decrypt"]
    resources = [var.platform.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "secrets" {
  name   = "secrets"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.secrets.json
}

# The task role: what the process itself may call (none but task_policy_json).
resource "aws_iam_role" "task" {
  name               = "${var.name}-task"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

resource "aws_iam_role_policy" "task" {
  count  = var.task_policy_json == null ? 0 : 1
  name   = "task"
  role   = aws_iam_role.task.id
  policy = var.task_policy_json
}

resource "aws_ecs_task_definition" "this" {
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  container_definitions = jsonencode([
    {
      name                   = "app"
      image                  = var.platform.image
      command                = var.command
      essential              = true
      readonlyRootFilesystem = true
      user                   = "1000"
      portMappings           = [{ containerPort = var.port, protocol = "tcp" }]
      environment            = local.environment
      secrets                = local.secrets
      mountPoints            = [{ sourceVolume = "tmp", containerPath = "/tmp", readOnly = false }]
      healthCheck = {
        command     = ["CMD", "python", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:${var.port}/${var.load_balanced ? "health" : "metrics"}').status != 200)"]
        interval    = 15
        timeout     = 5
        retries     = 3
        startPeriod = 120
      }
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this.name
          awslogs-region        = data.aws_region.current.region
          awslogs-stream-prefix = "app"
        }
      }
    }
  ])

  # Scratch space for Spark and Python (the root filesystem is read-only).
  volume {
    name = "tmp"
  }
}

resource "aws_security_group" "tasks" {
  name        = "${var.name}-tasks"
  description = "Tasks of ${var.name}: in from the load balancer only, out to the VPC and AWS APIs"
  vpc_id      = var.platform.vpc_id

  egress {
    description = "Kafka, Keyspaces and the other services inside the VPC"
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    cidr_blocks = [var.platform.vpc_cidr]
  }

  egress {
    # checkov:skip=CKV_AWS_382: AWS APIs (ECR, Secrets Manager, S3, CloudWatch) have no fixed addresses; HTTPS only.
    description = "AWS APIs over HTTPS"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_security_group_rule" "from_lb" {
  count                    = local.lb_count
  description              = "The load balancer's health checks and requests"
  type                     = "ingress"
  from_port                = var.port
  to_port                  = var.port
  protocol                 = "tcp"
  security_group_id        = aws_security_group.tasks.id
  source_security_group_id = aws_security_group.lb[0].id
}

resource "aws_security_group_rule" "from_vpc" {
  description       = "Prometheus scraping /metrics from inside the VPC"
  type              = "ingress"
  from_port         = var.port
  to_port           = var.port
  protocol          = "tcp"
  security_group_id = aws_security_group.tasks.id
  cidr_blocks       = [var.platform.vpc_cidr]
}

resource "aws_security_group" "lb" {
  # checkov:skip=CKV_AWS_260: Port 80 only answers with a redirect to HTTPS; websites' visitors may type http.
  count       = local.lb_count
  name        = "${var.name}-lb"
  description = "Load balancer of ${var.name}: HTTPS in, to the tasks out"
  vpc_id      = var.platform.vpc_id

  ingress {
    description = "HTTPS from the service's clients"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = var.lb_ingress_cidrs
  }

  ingress {
    description = "HTTP, redirected to HTTPS"
    from_port   = 80
    to_port     = 80
    protocol    = "tcp"
    cidr_blocks = var.lb_ingress_cidrs
  }

  egress {
    description = "To the tasks inside the VPC"
    from_port   = var.port
    to_port     = var.port
    protocol    = "tcp"
    cidr_blocks = [var.platform.vpc_cidr]
  }
}

resource "aws_lb" "this" {
  # checkov:skip=CKV2_AWS_28: The collector validates, rate-limits and dead-letters every call itself (ingest/); a WAF web ACL is attached per deployment where the site's traffic calls for one.
  count                      = local.lb_count
  name                       = substr(var.name, 0, 32)
  load_balancer_type         = "application"
  internal                   = !var.public
  subnets                    = var.lb_subnet_ids
  security_groups            = [aws_security_group.lb[0].id]
  drop_invalid_header_fields = true
  enable_deletion_protection = true

  access_logs {
    bucket  = var.access_log_bucket
    prefix  = "alb/${var.name}"
    enabled = true
  }
}

resource "aws_lb_target_group" "this" {
  # checkov:skip=CKV_AWS_378: TLS ends at the load balancer; the tasks listen in plain HTTP inside private subnets.
  count       = local.lb_count
  name        = substr(var.name, 0, 32)
  port        = var.port
  protocol    = "HTTP"
  target_type = "ip"
  vpc_id      = var.platform.vpc_id

  health_check {
    path                = "/health"
    matcher             = "200"
    interval            = 15
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

resource "aws_lb_listener" "https" {
  count             = local.lb_count
  load_balancer_arn = aws_lb.this[0].arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn   = var.certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.this[0].arn
  }
}

resource "aws_lb_listener" "http" {
  count             = local.lb_count
  load_balancer_arn = aws_lb.this[0].arn
  port              = 80
  protocol          = "HTTP"

  default_action {
    type = "redirect"
    redirect {
      port        = "443"
      protocol    = "HTTPS"
      status_code = "HTTP_301"
    }
  }
}

resource "aws_ecs_service" "this" {
  name                              = var.name
  cluster                           = var.platform.cluster_arn
  task_definition                   = aws_ecs_task_definition.this.arn
  desired_count                     = var.min_tasks
  launch_type                       = "FARGATE"
  health_check_grace_period_seconds = var.load_balanced ? 120 : null
  # The speed layer must never run twice at once (one checkpoint): stop, then start.
  deployment_minimum_healthy_percent = var.max_tasks == var.min_tasks ? 0 : 100
  deployment_maximum_percent         = var.max_tasks == var.min_tasks ? 100 : 200

  network_configuration {
    subnets          = var.platform.subnet_ids
    security_groups  = [aws_security_group.tasks.id]
    assign_public_ip = false
  }

  dynamic "load_balancer" {
    for_each = aws_lb_target_group.this
    content {
      target_group_arn = load_balancer.value.arn
      container_name   = "app"
      container_port   = var.port
    }
  }

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  lifecycle {
    ignore_changes = [desired_count] # autoscaling owns it
  }
}

resource "aws_appautoscaling_target" "this" {
  count              = var.max_tasks > var.min_tasks ? 1 : 0
  service_namespace  = "ecs"
  resource_id        = "service/${split("/", var.platform.cluster_arn)[1]}/${aws_ecs_service.this.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.min_tasks
  max_capacity       = var.max_tasks
}

resource "aws_appautoscaling_policy" "cpu" {
  count              = var.max_tasks > var.min_tasks ? 1 : 0
  name               = "${var.name}-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.this[0].service_namespace
  resource_id        = aws_appautoscaling_target.this[0].resource_id
  scalable_dimension = aws_appautoscaling_target.this[0].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.cpu_target_percent
    scale_in_cooldown  = 300
    scale_out_cooldown = 60
    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}
