"""Params (defaults and the run's conf), context keys and templated fields."""
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Param, task

with DAG("conf_params_templating", start_date=datetime(2026, 1, 1), schedule=None, catchup=False,
         params={"who": Param("world", type="string"), "times": 2}):
    @task
    def greet(params=None, ds=None, run_id=None):
        return [f"hello {params['who']}" * params["times"], ds]

    @task(templates_dict={"day": "{{ ds_nodash }}", "who": "{{ params.who | upper }}"})
    def templated(templates_dict=None):
        return templates_dict

    @task
    def argument(word):
        return word

    greet()
    templated()
    argument("{{ params.times * 3 }}-{{ ds }}")
    BashOperator(task_id="bash", bash_command="echo {{ params.who }} {{ ds }}")
