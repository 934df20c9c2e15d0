"""The figures of a `make bench-airflow` run, side by side: printed as they are taken, saved as JSON under
$TOCK_HOME, and summed up again by `make bench` (its ratios, with the run's date and load)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

SAVED_NAME = "bench-airflow.json"


@dataclass(frozen=True)
class Comparison:
    """One workload's figure on both systems, each with the load average (1, 5, 15 min) it was taken at."""

    name: str
    unit: str
    tock: float
    airflow: float
    tock_load: tuple[float, float, float]
    airflow_load: tuple[float, float, float]

    @property
    def ratio(self) -> float | None:
        """Airflow / Tock; None when Tock's figure is zero."""
        return self.airflow / self.tock if self.tock else None


def load_text(load: tuple[float, float, float]) -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in load)


def ratio_text(comparison: Comparison) -> str:
    return "n/a" if comparison.ratio is None else f"{comparison.ratio:,.1f}x"


def comparison_lines(comparison: Comparison) -> list[str]:
    """The lines printed for one comparison as it is taken."""
    return [f"  {comparison.name}",
            f"     Tock     {comparison.tock:>12,.3f} {comparison.unit:<7} ({load_text(comparison.tock_load)})",
            f"     Airflow  {comparison.airflow:>12,.3f} {comparison.unit:<7} ({load_text(comparison.airflow_load)})",
            f"     Airflow / Tock: {ratio_text(comparison)}"]


def to_json(date: str, airflow_version: str, comparisons: list[Comparison], notes: list[str]) -> dict:
    return {"date": date, "airflow": airflow_version, "notes": notes,
            "comparisons": [asdict(comparison) for comparison in comparisons]}


def from_json(saved: dict) -> list[Comparison]:
    return [Comparison(**{**entry, "tock_load": tuple(entry["tock_load"]),
                          "airflow_load": tuple(entry["airflow_load"])}) for entry in saved["comparisons"]]


def summary_lines(saved: dict) -> list[str]:
    """What `make bench` prints of the last bench-airflow run: one line per figure, the ratio first."""
    lines = [f"last `make bench-airflow` run: {saved['date']} (Airflow {saved['airflow']}, LocalExecutor, "
             "PostgreSQL; figures: Tock / Airflow, load average at each)"]
    for comparison in from_json(saved):
        lines.append(f"  {ratio_text(comparison):>8}  {comparison.name}: {comparison.tock:,.3f} / "
                     f"{comparison.airflow:,.3f} {comparison.unit} (load {comparison.tock_load[0]:.1f} / "
                     f"{comparison.airflow_load[0]:.1f})")
    return lines


def save(path: Path, saved: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1) + "\n")


def read_saved(path: Path) -> dict | None:
    """The last run's figures, or None when there was none (or the file is not one this code wrote)."""
    try:
        saved = json.loads(path.read_text())
        from_json(saved)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return saved
