"""The scheduler service: a pure core (services.scheduler.core) and its Kafka shell."""
