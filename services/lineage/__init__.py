"""``tock lineage``: the log as OpenLineage run events, through openlineage-python's transports."""
