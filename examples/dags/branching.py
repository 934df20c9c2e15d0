"""Branching and short circuits: pick a shipping path by order weight, skip the invoice when there is
nothing to bill, and join the branches again with a trigger rule that tolerates skips."""

from tock import DAG, AirflowSkipException, EmptyOperator, LatestOnlyOperator, TriggerRule, task

with DAG("example_branching", tags=["example"]) as dag:

    @task
    def weigh():
        return {"kg": 42, "billable": 0}

    @task.branch
    def pick_carrier(order: dict):
        return "freight" if order["kg"] > 30 else ["parcel"]

    @task
    def freight():
        print("booking a pallet")

    @task
    def parcel():
        print("printing a parcel label")

    @task.short_circuit
    def anything_to_bill(order: dict):
        return order["billable"] > 0

    @task
    def invoice():
        print("sending the invoice")

    @task
    def maybe_archive():
        raise AirflowSkipException("nothing to archive today")

    order = weigh()
    shipped = EmptyOperator(task_id="shipped", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    pick_carrier(order) >> [freight(), parcel()] >> shipped
    anything_to_bill(order) >> invoice()
    LatestOnlyOperator(task_id="only_latest") >> maybe_archive()
