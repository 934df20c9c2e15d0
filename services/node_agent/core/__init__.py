"""The node agent's pure core: quantities, the fold of its pods, what to do next, status bodies."""
