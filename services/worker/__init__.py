"""``tock worker``: a Celery worker whose task runs one try with the runner's rules (claim, supervise,
heartbeat, outcome straight to Kafka), and its presence in the log (WorkerHeartbeat).

Modules: ``tasks`` (the Celery task), ``run`` (starting the worker), ``presence`` (its heartbeats).
"""
