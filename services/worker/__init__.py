"""``tock worker``: a Celery worker (being written), and its presence in the log (presence.py)."""
