"""Cross-DAG: a TriggerDagRunOperator starting another DAG with a rendered conf, the DAG it triggers, and
an ExternalTaskSensor waiting on a task of another DAG's run at the same logical date."""
from datetime import datetime

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.providers.standard.sensors.external_task import ExternalTaskSensor
from airflow.sdk import DAG, task

with DAG("conf_trigger", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def before():
        return "before"

    before() >> TriggerDagRunOperator(task_id="start_target", trigger_dag_id="conf_trigger_target",
                                      conf={"who": "{{ dag_run.conf['who'] }}", "from": "{{ dag.dag_id }}"})

with DAG("conf_trigger_target", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def greet(dag_run=None):
        return f"hello {dag_run.conf['who']}"

    greet()

with DAG("conf_external_upstream", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    @task
    def load():
        return "loaded"

    load()

with DAG("conf_external_sensor", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    waiting = ExternalTaskSensor(task_id="wait_for_load", external_dag_id="conf_external_upstream",
                                 external_task_id="load", poke_interval=1, timeout=120, mode="reschedule")

    @task
    def downstream():
        return "after load"

    waiting >> downstream()
