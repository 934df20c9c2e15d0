"""Assets and a cross-DAG trigger: ``example_asset_producer`` updates the asset ``example://orders`` with an
extra, ``example_asset_consumer`` runs once per update (it is scheduled on the asset) and reads the event,
and its last task triggers ``example_asset_report`` with a conf, whose task reads the asset's latest updates
(it names the asset in its ``inlets``: ``inlet_events``). Trigger the producer (`tock dags trigger
example_asset_producer`) or record an update by hand (`tock assets event example://orders --extra '{"rows": 1}'`)."""

from tock import DAG, Asset, TriggerDagRunOperator, task

orders = Asset("example://orders", extra={"owner": "examples"})

with DAG("example_asset_producer", tags=["example"]) as producer:

    @task(outlets=[orders])
    def land_orders(outlet_events=None):
        outlet_events[orders].extra["rows"] = 3
        return 3

    land_orders()

with DAG("example_asset_consumer", schedule=[orders], tags=["example"]) as consumer:

    @task
    def read_orders(triggering_asset_events=None):
        events = triggering_asset_events[orders]
        print(f"{len(events)} update(s) of {orders.uri}: {[event.extra for event in events]}")
        return sum(int(event.extra.get("rows", 0)) for event in events)

    read_orders() >> TriggerDagRunOperator(task_id="report", trigger_dag_id="example_asset_report",
                                           conf={"from": "{{ dag_run.run_id }}"})

with DAG("example_asset_report", tags=["example"]) as report:

    @task(inlets=[orders])
    def write_report(dag_run=None, inlet_events=None):
        latest = [event.extra for event in inlet_events[orders].ascending(False).limit(3)]
        print(f"report asked by {dag_run.conf.get('from')}; the latest updates of {orders.uri}: {latest}")
        return {**dag_run.conf, "latest": latest}

    write_report()
