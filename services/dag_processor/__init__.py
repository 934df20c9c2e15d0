"""The DAG processor: finds DAG files, parses each in a supervised child, publishes definitions."""
