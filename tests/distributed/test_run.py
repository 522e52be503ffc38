"""``python -m ember.distributed.run`` (torchrun), ``ember.distributed.launch`` and
``ember.distributed.elastic.multiprocessing.errors``, against torch's torchrun on the same scripts:
the environment workers see, env:// init + all_reduce inside them, exit codes, failure reports,
restarts, the stream options, and the argument parser."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
            "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCHELASTIC_SIGNALS_TO_HANDLE",
            "OMP_NUM_THREADS"]


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "OMP_NUM_THREADS", "MASTER_", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK"))}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def launch(lib, *argv, module="run", timeout=80, env=None, cwd=None):
    """Run ``python -m <lib>.distributed.<module> argv...``; (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", f"{lib}.distributed.{module}", *map(str, argv)], capture_output=True,
                       text=True, timeout=timeout, env=env or _clean_env(), cwd=cwd or REPO)
    return p.returncode, p.stdout, p.stderr


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


ENV_SCRIPT = """
import json, os, sys
keys = json.loads(sys.argv[1])
sys.stdout.write("ENV " + json.dumps({k: os.environ.get(k) for k in keys}) + "\\n")
sys.stdout.write("PORT " + os.environ["MASTER_PORT"] + " RUNID " + os.environ["TORCHELASTIC_RUN_ID"] + "\\n")
"""


def _envs(out):
    return sorted((json.loads(line[4:]) for line in out.splitlines() if line.startswith("ENV ")),
                  key=lambda e: e["RANK"])


def test_static_rendezvous_env_and_explicit_omp(tmp_path):
    s = script(tmp_path, "env.py", ENV_SCRIPT)
    rc, out, err = launch("ember", "--nproc_per_node=3", "--master_port=0", "--master-addr", "127.0.0.1",
                          "--max-restarts", 2, s, json.dumps(ENV_KEYS + ["TORCHELASTIC_RUN_ID"]),
                          env=_clean_env(OMP_NUM_THREADS="4"))
    assert rc == 0, err
    envs = _envs(out)
    assert [e["RANK"] for e in envs] == ["0", "1", "2"] == [e["LOCAL_RANK"] for e in envs]
    for e in envs:
        assert (e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"], e["MASTER_ADDR"]) == ("3", "3", "0",
                                                                                                 "127.0.0.1")
        assert (e["TORCHELASTIC_MAX_RESTARTS"], e["TORCHELASTIC_RESTART_COUNT"], e["OMP_NUM_THREADS"]) == ("2", "0",
                                                                                                             "4")
        assert e["TORCHELASTIC_RUN_ID"] == "none"
    assert "Setting OMP_NUM_THREADS" not in err       # the user's value is kept, no warning
    assert int(re.search(r"PORT (\d+)", out).group(1)) > 0


ALLREDUCE = """
import json, os, sys
import numpy as np
sys.stdout.write("ENV " + json.dumps({{k: os.environ.get(k) for k in json.loads(sys.argv[2])}}) + "\\n")
sys.stdout.write("PORT " + os.environ["MASTER_PORT"] + " RUNID " + os.environ["TORCHELASTIC_RUN_ID"] + "\\n")
import {lib} as torch
import {lib}.distributed as dist
dist.init_process_group({backend})
rank, world = dist.get_rank(), dist.get_world_size()
x = np.random.default_rng(int(sys.argv[1]) + rank).standard_normal(5)
t = torch.tensor(x)
dist.all_reduce(t)
g = [torch.zeros(1) for _ in range(world)]
dist.all_gather(g, torch.tensor([float(rank)]))
sys.stdout.write(f"OUT {{rank}} {{world}} {{t.tolist()!r}} {{[v.item() for v in g]}}\\n")
dist.destroy_process_group()
"""


def test_worker_env_and_env_init_all_reduce_match_torchrun(tmp_path):
    """--standalone, 2 workers: the environment they see and init_process_group() (env://) +
    all_reduce/all_gather inside them, ember's launcher and ember vs torchrun and torch."""
    seed = int(np.random.default_rng().integers(1 << 30))
    outs, envs = {}, {}
    libs = ["ember"] + (["torch"] if _has_torch() else [])
    for lib in libs:
        s = script(tmp_path, f"{lib}_ar.py", ALLREDUCE.format(lib=lib, backend='"gloo"' if lib == "torch" else ""))
        rc, out, err = launch(lib, "--nproc-per-node", 2, "--standalone", s, seed, json.dumps(ENV_KEYS))
        assert rc == 0, (lib, err)
        assert "Setting OMP_NUM_THREADS environment variable for each process to be 1" in err, lib
        outs[lib] = sorted(line for line in out.splitlines() if line.startswith("OUT"))
        envs[lib] = _envs(out)
        if lib == "ember":
            ports = set(re.findall(r"PORT (\d+) RUNID (\S+)", out))
            assert len(ports) == 1                                   # one store for the whole run, a real port
            port, run_id = ports.pop()
            assert 0 < int(port) < 65536 and re.fullmatch(r"[0-9a-f-]{36}", run_id)     # --standalone: a uuid4
    expect = sum(np.random.default_rng(seed + r).standard_normal(5) for r in range(2))
    assert len(outs["ember"]) == 2 and len(envs["ember"]) == 2
    assert [(e["RANK"], e["WORLD_SIZE"], e["MASTER_ADDR"]) for e in envs["ember"]] == [("0", "2", "localhost"),
                                                                                       ("1", "2", "localhost")]
    for line in outs["ember"]:
        vals = eval(line.split(" ", 3)[3].rsplit(" [", 1)[0])  # noqa: S307 - our own output
        np.testing.assert_allclose(vals, expect, rtol=1e-12)
        assert line.endswith("[0.0, 1.0]")
    if "torch" in outs:
        assert outs["ember"] == outs["torch"]
        assert envs["ember"] == envs["torch"]


def _has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


FAIL = """
import os, sys, time
from {lib}.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        raise ValueError("boom from rank 1: " + sys.argv[1])
    time.sleep(90)

main()
"""

FAIL_NO_RECORD = """
import os, sys, time
if os.environ["LOCAL_RANK"] == "0":
    sys.exit(3)
time.sleep(90)
"""


def _report(err):
    """The ChildFailedError report, normalised: no times, pids, paths, hosts; code lines dropped."""
    rep = err[re.search(r"\S*ChildFailedError:", err).start():]
    rep = re.sub(r"time      : \S+", "time      : T", rep)
    rep = re.sub(r"host      : \S+", "host      : H", rep)
    rep = re.sub(r"pid: \d+|PID \d+", "pid", rep)
    rep = re.sub(r"error_file: /\S+", "error_file: FILE", rep)
    rep = re.sub(r"\S+(\.py\s+FAILED)", r"X\1", rep)
    rep = "\n".join(line for line in rep.splitlines()
                    if not re.match(r"\s+(File |return |\^)", line))      # frames differ: torch's vs ember's files
    return rep


def test_failure_report_matches_torchrun(tmp_path):
    tag = str(np.random.default_rng().integers(1 << 20))
    reports = {}
    for lib in ["ember"] + (["torch"] if _has_torch() else []):
        s = script(tmp_path, f"fail_{lib}.py", FAIL.format(lib=lib))
        t0 = time.monotonic()
        rc, out, err = launch(lib, "--nproc-per-node", 2, "--master-port", 0, s, tag)
        assert rc == 1, (lib, err)
        assert time.monotonic() - t0 < 45        # rank 0 (sleeping 90 s) was stopped, not waited for
        reports[lib] = _report(err)
        assert f"ValueError: boom from rank 1: {tag}" in err
    rep = reports["ember"]
    assert "ember.distributed.elastic.multiprocessing.errors.ChildFailedError" in rep
    root = rep[rep.index("Root Cause"):]
    assert "rank      : 1 (local_rank: 1)" in root and "exitcode  : 1 (pid) \n" in root
    assert "error_file: FILE" in root and f"ValueError: boom from rank 1: {tag}" in root
    others = rep[rep.index("Failures:"):rep.index("Root Cause")]
    assert "rank      : 0 (local_rank: 0)" in others and "exitcode  : -15 (pid)  (SIGTERM)" in others
    assert "Signal 15 (SIGTERM) received by pid" in others
    if "torch" in reports:
        assert rep.replace("ember.", "torch.", 1) == reports["torch"]


def test_failure_without_record_matches_torchrun(tmp_path):
    s = script(tmp_path, "exit3.py", FAIL_NO_RECORD)
    reports = {}
    for lib in ["ember"] + (["torch"] if _has_torch() else []):
        rc, out, err = launch(lib, "--nproc-per-node", 2, "--master-port", 0, s)
        assert rc == 1, (lib, err)
        reports[lib] = _report(err)
    rep = reports["ember"]
    assert "exitcode  : 3 (pid) \n  error_file: <N/A>\n  traceback : To enable traceback see: " \
           "https://pytorch.org/docs/stable/elastic/errors.html" in rep
    if "torch" in reports:
        assert rep.replace("ember.", "torch.", 1) == reports["torch"]


def test_worker_ignoring_sigterm_is_killed(tmp_path):
    s = script(tmp_path, "stubborn.py", """
        import os, signal, sys, time
        if os.environ["LOCAL_RANK"] == "1":
            time.sleep(0.5)
            sys.exit(4)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(90)
    """)
    t0 = time.monotonic()
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--shutdown-timeout", 1, s)
    assert rc == 1 and time.monotonic() - t0 < 45
    assert "forcefully exiting via SIGKILL" in err
    rep = _report(err)
    assert "exitcode  : -9 (pid)  (SIGKILL)" in rep.split("Root Cause")[0]
    assert "exitcode  : 4 (pid) " in rep.split("Root Cause")[1]


RESTART = """
import os, sys
import ember as torch
import ember.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group()
sys.stdout.write(f"START {dist.get_rank()} {attempt}\\n")
if attempt < int(sys.argv[1]) and dist.get_rank() == 1:
    sys.exit(7)                    # rank 0 is blocked in all_reduce: the agent must stop it
t = torch.tensor([dist.get_rank() + 10.0 * attempt])
dist.all_reduce(t)
sys.stdout.write(f"DONE {dist.get_rank()} {attempt} {t.item()}\\n")
dist.destroy_process_group()
"""


def test_restarts_until_success_and_until_exhausted(tmp_path):
    s = script(tmp_path, "restart.py", RESTART)
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--max-restarts", 3,
                          "--monitor-interval", 0.05, s, 2)
    assert rc == 0, err
    assert sorted(re.findall(r"DONE (\d) (\d) (\S+)", out)) == [("0", "2", "41.0"), ("1", "2", "41.0")]
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--max-restarts", 1,
                          "--monitor-interval", 0.05, s, 5)
    assert rc == 1 and "DONE" not in out
    rep = _report(err)
    assert sorted(re.findall(r"START (\d) (\d)", out)) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    assert "exitcode  : 7 (pid)" in rep.split("Root Cause")[1]


def test_module_no_python_run_path(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import os, sys\n"
                                  "sys.stdout.write(f\"MOD {__name__} {os.environ['RANK']} {sys.argv[1:]}\\n\")\n")
    env = _clean_env()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "-m", "mypkg.train", "--lr", 1, env=env)
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["MOD __main__ 0 ['--lr', '1']", "MOD __main__ 1 ['--lr', '1']"]

    sh = tmp_path / "worker.sh"
    sh.write_text('#!/bin/sh\necho "SH $RANK $LOCAL_WORLD_SIZE $1"\n')
    sh.chmod(0o755)
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--no-python", sh, "arg")
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["SH 0 2 arg", "SH 1 2 arg"]

    s = script(tmp_path, "rp.py", "import sys\nprint('RP', __name__, sys.argv)\n")
    rc, out, err = launch("ember", "--nproc-per-node", 1, "--master-port", 0, "--run-path", s, "z")
    assert rc == 0, err
    assert out.strip() == f"RP __main__ {[s, 'z']}"

    rc, out, err = launch("ember", "--no-python", "-m", "mypkg.train")
    assert rc == 1
    assert "ValueError: Don't use both the '--no-python' flag and the '--module' flag at the same time." in err


def test_tee_redirects_log_dir_and_filter(tmp_path):
    s = script(tmp_path, "io.py", "import os, sys\nsys.stdout.write('out ' + os.environ['RANK'] + '\\n')\n"
                                  "sys.stderr.write('err ' + os.environ['RANK'] + '\\n')\n")
    logs = tmp_path / "logs"
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--log-dir", logs, "--tee", 1,
                          "--redirects", 2, s)
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["[default0]:out 0", "[default1]:out 1"]
    assert "err 0" not in err and "err 1" not in err              # stderr redirected to files only
    (run_dir,) = list(logs.iterdir())
    assert run_dir.name.startswith("none_")
    for r in range(2):
        d = run_dir / "attempt_0" / str(r)
        assert (d / "stdout.log").read_text() == f"out {r}\n" and (d / "stderr.log").read_text() == f"err {r}\n"

    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--local-ranks-filter", 1, s)
    assert rc == 0 and out.strip() == "out 1" and "err 1" in err and "err 0" not in err
    rc, out, err = launch("ember", "--nproc-per-node", 2, "--master-port", 0, "--redirects", "0:3", s)
    assert rc == 0 and out.strip() == "out 1"


def test_launcher_sigterm_stops_workers(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    s = script(tmp_path, "sleep.py", f"import os, time\nopen(os.path.join({str(pids)!r}, str(os.getpid())), 'w')"
                                     f".close()\ntime.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--master-port",
                          "0", s], env=_clean_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 30
    while len(os.listdir(pids)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode != 0 and "SignalException" in err
    for pid in map(int, os.listdir(pids)):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_launch_passes_local_rank_and_warns(tmp_path):
    s = script(tmp_path, "lr.py", "import os, sys\n"
                                  "sys.stdout.write(f\"LR {os.environ['LOCAL_RANK']} {sys.argv[1:]}\\n\")\n")
    for lib in ["ember"] + (["torch"] if _has_torch() else []):
        rc, out, err = launch(lib, "--nproc-per-node", 2, "--master-port", 0, s, "a", module="launch")
        assert rc == 0, err
        assert sorted(out.splitlines()) == ["LR 0 ['--local-rank=0', 'a']", "LR 1 ['--local-rank=1', 'a']"], lib
        assert "FutureWarning: The module torch.distributed.launch is deprecated" in err
    rc, out, err = launch("ember", "--use-env", "--nproc-per-node", 1, "--master-port", 0, s, "a", module="launch")
    assert rc == 0 and out.strip() == "LR 0 ['a']"
    from ember.distributed import launch as elaunch
    with pytest.warns(FutureWarning, match="torch.distributed.launch is deprecated"), \
            pytest.raises(ValueError, match="When using the '--no-python' flag, you must also set the '--use-env'"):
        elaunch.main(["--no-python", "prog"])


# -- in-process: the parser, config checks, record / ChildFailedError ---------------------------------------------

PARSE_CASES = [
    ["train.py"],
    ["--nproc-per-node=4", "--standalone", "train.py", "--lr", "0.1"],
    ["--nproc_per_node", "auto", "--max_restarts", "3", "--monitor_interval", "0.5", "-m", "pkg.mod", "-x"],
    ["--no-python", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:1234", "--rdzv-id", "j1", "prog"],
    ["--log-dir", "/tmp/x", "--redirects", "3", "--tee", "0:1,1:2", "--local-ranks-filter", "0,1", "--role", "w",
     "--run-path", "--master-addr", "10.0.0.1", "--master-port", "1234", "--nnodes", "1:1", "s.py"],
]


@pytest.mark.parametrize("argv", PARSE_CASES)
def test_parse_args_matches_torch(argv):
    torch = pytest.importorskip("torch")  # noqa: F841
    from torch.distributed import run as trun

    from ember.distributed import run as erun
    got, want = vars(erun.parse_args(argv)), vars(trun.parse_args(argv))
    assert got == want


def test_pet_env_defaults(monkeypatch):
    from ember.distributed.run import parse_args
    monkeypatch.setenv("PET_NPROC_PER_NODE", "3")
    monkeypatch.setenv("PET_STANDALONE", "1")
    monkeypatch.setenv("PET_MAX_RESTARTS", "2")
    a = parse_args(["t.py"])
    assert (a.nproc_per_node, a.standalone, a.max_restarts) == ("3", True, 2)
    assert parse_args(["--nproc-per-node", "5", "t.py"]).nproc_per_node == "5"


def test_config_errors_and_nproc():
    from ember.distributed.run import config_from_args, determine_local_world_size, parse_args
    assert determine_local_world_size("7") == 7
    assert determine_local_world_size("cpu") == determine_local_world_size("auto") == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="Unsupported nproc_per_node value: bogus"):
        determine_local_world_size("bogus")
    with pytest.raises(ValueError, match="Cuda is not available"):
        determine_local_world_size("gpu")
    with pytest.raises(NotImplementedError, match=r"multi-node launch \(--nnodes=2\) is not supported"):
        config_from_args(parse_args(["--nnodes", "2", "t.py"]))
    with pytest.raises(NotImplementedError, match=r"--node-rank=1"):
        config_from_args(parse_args(["--node-rank", "1", "t.py"]))
    with pytest.raises(NotImplementedError, match="rendezvous backend 'etcd'"):
        config_from_args(parse_args(["--rdzv-backend", "etcd", "t.py"]))
    with pytest.raises(ValueError, match=r"--redirects: expected 0, 1, 2 or 3.*got '9'"):
        config_from_args(parse_args(["--redirects", "9", "t.py"]))
    with pytest.raises(ValueError, match="--local_ranks_filter must be a comma-separated list of integers"):
        config_from_args(parse_args(["--local-ranks-filter", "a,b", "t.py"]))
    with pytest.raises(ValueError, match=r"--rdzv-conf: expected <key1>=<value1>.*got the item 'oops'"):
        config_from_args(parse_args(["--rdzv-conf", "join_timeout=5,oops", "t.py"]))
    with pytest.raises(AssertionError, match="max_restarts must be >= 0"):
        config_from_args(parse_args(["--max-restarts", "-1", "t.py"]))
    spec = config_from_args(parse_args(["--master-port", "0", "--tee", "0:3", "-m", "pkg.mod", "a"]))
    assert spec.cmd == [sys.executable, "-u", "-m", "pkg.mod", "a"] and spec.name == "pkg.mod"
    assert spec.tee == {0: 3} and spec.master_addr == "127.0.0.1"


def _raise_in(record, exc):
    @record
    def f():
        raise exc
    return f


def test_record_writes_torch_error_file(tmp_path, monkeypatch):
    from ember.distributed.elastic.multiprocessing.errors import record
    msg = f"bad value {np.random.default_rng().integers(1000)}"
    libs = {"ember": record}
    if _has_torch():
        from torch.distributed.elastic.multiprocessing.errors import record as trecord
        libs["torch"] = trecord
    data = {}
    for lib, rec in libs.items():
        path = tmp_path / f"{lib}.json"
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
        with pytest.raises(KeyError):
            _raise_in(rec, KeyError(msg))()
        data[lib] = json.loads(path.read_text())
        assert rec(lambda: sys.exit(0))() is None           # exit(0) is success, as torch
        with pytest.raises(SystemExit):
            rec(lambda: sys.exit(2))()
    m = data["ember"]["message"]
    assert m["message"] == f"KeyError: {msg!r}"
    assert "Traceback (most recent call last)" in m["extraInfo"]["py_callstack"]
    assert abs(int(m["extraInfo"]["timestamp"]) - time.time()) < 60
    if "torch" in data:
        t = data["torch"]["message"]
        assert t.keys() == m.keys() and t["extraInfo"].keys() == m["extraInfo"].keys()
        assert t["message"] == m["message"]
        assert t["extraInfo"]["py_callstack"].splitlines()[-1] == m["extraInfo"]["py_callstack"].splitlines()[-1]


def test_child_failed_error_format_matches_torch(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")  # noqa: F841
    from torch.distributed.elastic.multiprocessing import errors as terr

    from ember.distributed.elastic.multiprocessing import errors as eerr
    err_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err_file))
    with pytest.raises(RuntimeError):
        _raise_in(eerr.record, RuntimeError("worker exploded"))()
    ts = int(time.time())
    cases = [  # (rank, local rank, pid, exitcode, error file)
        [(3, 1, 4242, 1, str(err_file)), (2, 0, 4241, -15, "/nonexistent/e.json")],
        [(0, 0, 11, 2, "/nonexistent/e.json")],
        [(5, 1, 12, -9, "/nonexistent/e.json"), (4, 0, 13, 1, str(err_file)), (6, 2, 14, -6, "")],
    ]
    for case in cases:
        msgs = []
        for mod in (eerr, terr):
            failures = {}
            for rank, lr, pid, code, f in case:
                pf = mod.ProcessFailure(local_rank=lr, pid=pid, exitcode=code, error_file=f)
                if pf.error_file == "<N/A>":
                    pf.timestamp = ts + 5         # the stopped ones fail later
                failures[rank] = pf
            e = mod.ChildFailedError("train.py", failures)
            msgs.append(str(e))
            assert e.get_first_failure()[0] in failures
        assert msgs[0] == msgs[1]
    with pytest.raises(AssertionError):
        eerr.ChildFailedError("x", {})
