"""Params: the trigger form is generated from them, and a conf they refuse is refused (the API's 422,
the CLI's exit 2, the form again with the rule beside the input). Triggered by hand only."""

from tock import DAG, BashTask, Param

with DAG("example_params", tags=["example"], params={
    "count": Param(3, type="integer", minimum=1, maximum=10, title="How many", description="lines to print"),
    "greeting": Param("hello", type="string", enum=["hello", "bonjour", "hola"]),
    "who": Param("world", type="string", minLength=2, description="whom to greet"),
    "shout": Param(False, type="boolean"),
    "options": Param({"colour": "blue"}, type="object"),
}) as dag:
    BashTask("greet", "echo triggered with params")
