"""Dynamic task mapping: one instance of ``square`` per number ``numbers`` returns, a fixed argument
given with ``partial``, and a reduce that reads every instance's value in map index order; a product
of two literals; two upstream values zipped (the shorter filled), one instance per pair; and a mapped
task group, a chain of two tasks per city, each city's second task after its own first."""

from tock import DAG, task, task_group

with DAG("example_mapping", tags=["example"]) as dag:

    @task
    def numbers() -> list[int]:
        return [1, 2, 3, 4]

    @task
    def square(number: int, offset: int) -> int:
        return number * number + offset

    @task
    def total(squares: list[int]) -> int:
        print(f"the squares are {squares}")
        return sum(squares)

    @task
    def greet(name: str, punctuation: str) -> str:
        return f"hello {name}{punctuation}"

    total(square.partial(offset=0).expand(number=numbers()))
    greet.expand(name=["ada", "grace"], punctuation=["!", "?"])

    @task
    def names() -> list[str]:
        return ["ada", "grace", "edsger"]

    @task
    def born() -> list[int]:
        return [1815, 1906]

    @task
    def introduce(person: tuple[str, int | str]) -> str:
        name, year = person
        return f"{name}, born {year}"

    introduce.expand(person=names().zip(born(), fillvalue="(unknown)"))

    @task
    def fetch(city: str) -> dict:
        return {"city": city, "letters": len(city)}

    @task
    def describe(reading: dict) -> str:
        return f"{reading['city']} has {reading['letters']} letters"

    @task_group
    def per_city(city: str):
        return describe(fetch(city=city))

    @task
    def report(lines: list[str]) -> str:
        print("\n".join(lines))
        return f"{len(lines)} cities"

    report(per_city.expand(city=["oslo", "lima", "ouagadougou"]))
