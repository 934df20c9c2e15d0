"""Tock: the public authoring API for DAG files (DAG, task, BashTask)."""
