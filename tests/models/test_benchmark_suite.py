"""The benchmark harness itself: one tiny row through the real worker processes.

Times nothing against anything (unit tests never time): it checks that the harness records
what the README's tables are built from -- for a compiled cell, the eager and compiled steps
interleaved in one process and their ratio -- and writes its table and JSON."""
import json
import statistics
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite.py"


def test_suite_records_interleaved_ratio_for_compiled_cells(tmp_path):
    r = subprocess.run([sys.executable, str(SUITE), "--models", "adamw", "--scale", "0.01", "--reps", "3",
                        "--warmup", "1", "--rounds", "2", "--no-torch", "--no-warm", "--threads", "1",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "suite.json").read_text())["results"]["adamw/training"]
    eager, compiled = res["ember eager"], res["ember compiled"]
    assert "error" not in eager and "error" not in compiled, (eager, compiled)
    assert "interleaved" not in eager                  # only compiled cells have an eager partner
    rounds = compiled["interleaved_rounds"]
    assert len(rounds) == 2 and all(x["pairs"] == 3 for x in rounds)
    for x in rounds:
        assert x["eager_ms"] > 0 and x["compiled_ms"] > 0 and x["ratio"] > 0
    assert compiled["interleaved_ratio"] == statistics.median(x["ratio"] for x in rounds)
    table = (tmp_path / "suite.md").read_text()
    assert "same, interleaved in one process" in table
    assert f"{compiled['interleaved_ratio']:.2f}x" in table
