"""Task groups: a nightly import whose per-source steps live in groups (one built with a `with` block,
two with `@task_group`), with group default_args, a nested group and groups as dependency ends."""

from tock import DAG, BashTask, EmptyOperator, TaskGroup, chain, task, task_group

with DAG("example_task_groups", tags=["example"]) as dag:
    begin = EmptyOperator(task_id="begin")

    with TaskGroup("crm", tooltip="Customer records", default_args={"retries": 2}) as crm:
        fetch = BashTask("fetch", "echo fetching customers")
        with TaskGroup("clean"):
            dedupe = BashTask("dedupe", "echo removing duplicates")
        fetch >> dedupe

    @task_group
    def source(name: str):
        """Fetch one source and count its rows."""

        @task
        def fetch_rows(source_name: str):
            return [f"{source_name}-{n}" for n in range(3)]

        @task
        def count(rows: list):
            return len(rows)

        rows = fetch_rows(name)
        begin >> rows
        return count(rows)  # the call returns this task (not the group), as Airflow's @task_group does

    @task
    def summary(*counts):
        print(f"rows per source: {counts}")

    shop, ledger = source("shop"), source("ledger")
    chain(begin, crm, EmptyOperator(task_id="crm_loaded"))
    [crm, summary(shop, ledger)] >> EmptyOperator(task_id="done")
