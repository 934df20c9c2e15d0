"""The runner's pure rules: who runs a try (claim)."""
