"""The asset watcher's pure part: watched topics and the events records make."""
