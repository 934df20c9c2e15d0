"""The Airflow side of `make bench-airflow` (tests/benchmarks/bench_airflow.py): the DAG files written for
Airflow 3.3.2 (``dags/``, and the parse workload's generator), its services run as processes, what is read
back from its metadata database, and the saved comparison `make bench` prints."""
