"""``tock monitor``: deadline misses and windowed statistics, folded from tock.events."""
