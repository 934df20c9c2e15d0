"""A scheduled DAG: runs every minute, without catching up on minutes it missed."""

from tock import DAG, BashTask

with DAG("example_every_minute", schedule="* * * * *", catchup=False, max_active_runs=1,
         tags=["example"]) as dag:
    BashTask("tick", "date -u +'tick at %H:%M:%S'")
