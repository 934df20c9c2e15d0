"""``tock api``: HTTP reads over the projection tables; commands appended to the log, never to tables."""
