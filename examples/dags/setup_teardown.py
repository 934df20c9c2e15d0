"""Setup and teardown: a scratch database is created before the work and dropped after it, even when
the work fails; a second, decorated pair wraps a report with the context-manager form."""

from tock import DAG, BashTask, setup, task, teardown

with DAG("example_setup_teardown", tags=["example"]) as dag:
    create_db = BashTask("create_scratch_db", "echo creating scratch database")
    load = BashTask("load", "echo loading rows into scratch")
    transform = BashTask("transform", "echo transforming rows")
    drop_db = BashTask("drop_scratch_db", "echo dropping scratch database")

    create_db >> load >> transform >> drop_db.as_teardown(setups=create_db)

    @setup
    def open_session():
        return "session-1"

    @teardown
    def close_session():
        print("closing the report session")

    with open_session() >> close_session():

        @task
        def report():
            print("writing the report")

        report()
