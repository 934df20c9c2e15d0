"""``tock asset-watcher``: records of Kafka topics as asset events, exactly once (tock/watchers.py)."""
