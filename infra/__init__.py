"""Adapters to the outside world (Kafka, SQL, Celery, Kubernetes) and local infrastructure."""
