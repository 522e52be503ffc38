"""``python -m ember.prims.coverage``: every op is composite, decomposed or explicitly extern."""
from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from ember.ops import registry
from ember.prims import all_prims, coverage, decomposition_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the ops this engineer's files decompose: they must all trace to prims on the example inputs
MINE = ("ember.ops.pointwise", "ember.ops.reduction", "ember.ops.creation", "ember.ops.copy")


def _module(op):
    fn = op.kernel or op.composite
    return getattr(fn, "__module__", "")


@pytest.fixture(scope="module")
def all_rows():
    return coverage.rows()


def test_rows_cover_every_op(all_rows):
    rows = {r["name"]: r for r in all_rows}
    expected = {n for n, op in registry.OPS.items() if "prim" not in op.tags and "inplace" not in op.tags}
    assert set(rows) == expected
    for name, r in rows.items():
        assert r["kind"] in ("composite", "decomp", "extern", "MISSING")
        if r["kind"] == "extern":
            assert r["note"], f"extern op {name} needs a reason"
    table = decomposition_table()
    for name, r in rows.items():
        op = registry.OPS[name]
        assert (r["kind"] == "decomp") == (op in table)


def test_my_ops_reach_prims_only(all_rows):
    rows = {r["name"]: r for r in all_rows}
    for name, op in registry.OPS.items():
        if "prim" in op.tags or "inplace" in op.tags or _module(op) not in MINE:
            continue
        r = rows[name]
        assert r["kind"] in ("decomp", "composite"), (name, r)
        assert isinstance(r["prims"], int) and r["prims"] >= 1 or name == "contiguous", (name, r)
        assert "still calls" not in r["note"], (name, r)


def test_extern_prims_are_named(all_rows):
    rows = {r["name"]: r for r in all_rows}
    assert "extern prim mm" in rows["mm"]["note"]
    assert "extern prim sort" in rows["sort"]["note"]
    assert "extern prim topk" in rows["topk"]["note"]


def test_main_prints_table_and_prim_count(capsys, monkeypatch, all_rows):
    monkeypatch.setattr(coverage, "rows", lambda: copy.deepcopy(all_rows))
    status = coverage.main([])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["op", "kind", "prims"]
    assert f"prims: {len(all_prims())}" in lines[-1]
    assert "softmax" in out and "logsumexp" in out
    missing = [r["name"] for r in all_rows if r["kind"] == "MISSING"]
    assert status == (1 if missing else 0)


def test_exit_status_nonzero_when_an_op_is_uncovered(monkeypatch, all_rows):
    def rows_without_exp():
        out = copy.deepcopy(all_rows)
        for r in out:
            if r["name"] == "exp":
                r["kind"] = "MISSING"
            elif r["kind"] == "MISSING":
                r["kind"] = "extern"
        return out
    monkeypatch.setattr(coverage, "rows", rows_without_exp)
    assert coverage.main([]) == 1
    monkeypatch.setattr(coverage, "rows", lambda: [dict(r, kind="decomp") for r in all_rows])
    assert coverage.main([]) == 0


def test_module_runs_as_script():
    r = subprocess.run([sys.executable, "-m", "ember.prims.coverage"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert "prims:" in r.stdout, r.stderr[-2000:]
    missing = [ln for ln in r.stdout.splitlines() if " MISSING " in ln]
    assert r.returncode == (1 if missing else 0), r.stdout[-2000:]
