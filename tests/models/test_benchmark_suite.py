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


ROOFLINE = SUITE.parent / "roofline.py"


def test_roofline_prints_every_program_and_the_torch_column():
    """roofline.py on a small size: a row per program; with ``--torch`` (when PyTorch is
    installed: the 3.11 test venv) torch.compile's time and share of the copy on each row."""
    import importlib.util
    has_torch = importlib.util.find_spec("torch") is not None
    cmd = [sys.executable, str(ROOFLINE), "--numel", "64000", "--reps", "2"] + (["--torch"] if has_torch else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("copy bandwidth:")
    assert ("torch.compile ms" in lines[1]) == has_torch
    rows = lines[2:]
    names = ["pointwise chain (10 ops)", "two-input pointwise", "pointwise chain, arithmetic",
             "three-input pointwise", "row sum of squares", "column sum of squares",
             "softmax over rows", "layer_norm over rows"]
    assert [next((nm for nm in names if row.startswith(nm)), None) for row in rows] == names, r.stdout
    for row in rows:
        fields = row.split()
        assert fields[-1].endswith("%") and fields[-2 if not has_torch else -4].endswith("%"), row
        if has_torch:
            assert float(fields[-2]) > 0, row


def test_roofline_torch_flag_without_torch_says_what_is_missing(tmp_path):
    """``--torch`` where torch cannot be imported: an error naming the flag and the package."""
    hide = tmp_path / "torch"
    hide.mkdir()
    (hide / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(SUITE.parents[1])]))
    r = subprocess.run([sys.executable, str(ROOFLINE), "--numel", "8000", "--reps", "1", "--torch"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode != 0
    assert "--torch" in r.stderr and "torch" in r.stderr and "not installed" in r.stderr, r.stderr
