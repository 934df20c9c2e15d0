"""The saved Tock / Airflow comparison (tests/benchmarks/airflow_side/report.py): what `make bench` prints
of the last `make bench-airflow` run, from its JSON."""

from __future__ import annotations

import json

from tests.benchmarks.airflow_side.report import (
    Comparison,
    comparison_lines,
    from_json,
    read_saved,
    save,
    summary_lines,
    to_json,
)

W1 = Comparison("W1", "s", 2.0, 30.0, (4.0, 3.0, 2.0), (5.5, 3.5, 2.5))
ZERO = Comparison("never", "s", 0.0, 1.0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0))


def test_the_ratio_is_airflow_over_tock_and_none_when_tock_measured_zero():
    assert W1.ratio == 15.0
    assert ZERO.ratio is None


def test_a_comparison_prints_both_figures_with_their_load_and_the_ratio():
    lines = comparison_lines(W1)
    assert "2.000 s" in lines[1] and "load average 4.00 3.00 2.00" in lines[1]
    assert "30.000 s" in lines[2] and "load average 5.50 3.50 2.50" in lines[2]
    assert lines[3].endswith("Airflow / Tock: 15.0x")


def test_the_saved_json_reads_back_as_the_same_comparisons(tmp_path):
    path = tmp_path / "bench-airflow.json"
    save(path, to_json("2026-12-07T06:00:00+00:00", "3.3.2", [W1, ZERO], []))
    saved = read_saved(path)
    assert from_json(saved) == [W1, ZERO]


def test_the_summary_names_the_date_and_gives_one_line_per_figure_ratio_first():
    lines = summary_lines(to_json("2026-12-07T06:00:00+00:00", "3.3.2", [W1, ZERO], []))
    assert "2026-12-07T06:00:00+00:00" in lines[0] and "Airflow 3.3.2" in lines[0]
    assert lines[1].split() == ["15.0x", "W1:", "2.000", "/", "30.000", "s", "(load", "4.0", "/", "5.5)"]
    assert lines[2].split()[0] == "n/a"


def test_no_file_or_a_foreign_file_means_no_last_run(tmp_path):
    assert read_saved(tmp_path / "missing.json") is None
    (tmp_path / "other.json").write_text(json.dumps({"date": "x"}))
    assert read_saved(tmp_path / "other.json") is None
    (tmp_path / "broken.json").write_text("{")
    assert read_saved(tmp_path / "broken.json") is None
