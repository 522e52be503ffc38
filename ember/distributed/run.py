"""``python -m ember.distributed.run`` (torchrun): launch N worker processes of a training
script on this machine, each with torchelastic's environment (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``, ``TORCHELASTIC_*``...), so that
``ember.distributed.init_process_group()`` with no arguments joins them into one group.

::

    python -m ember.distributed.run --nproc-per-node=2 train.py --lr 0.1
    python -m ember.distributed.run --standalone --nproc-per-node=cpu -m mypkg.train
    python -m ember.distributed.run --nproc-per-node=2 --max-restarts=3 train.py

A worker that fails stops the others; the group restarts (``TORCHELASTIC_RESTART_COUNT``
counts attempts) up to ``--max-restarts`` times, then the launcher raises
``ChildFailedError`` (exit status 1) with torch's report: each failed rank's exit code and,
when the script's entry point is decorated with
``ember.distributed.elastic.multiprocessing.errors.record``, its traceback.

Options are torchrun's; each may also come from ``PET_<OPTION>`` in the environment (e.g.
``PET_NPROC_PER_NODE=2``), as torch. Single node only: ``--nnodes`` other than 1 and the
etcd rendezvous backends raise ``NotImplementedError``; ``--start-method``,
``--event-log-handler``, ``--local-addr``, ``--numa-binding`` and the duplicate-filter options
are accepted for compatibility and have no effect (workers are always separate
interpreters started with ``subprocess``)."""
from __future__ import annotations

import logging
import os
import re
import sys
import uuid
from argparse import REMAINDER, Action, ArgumentParser

from .elastic.agent import LOCAL_RANK_MACRO, LocalElasticAgent, WorkerSpec
from .elastic.multiprocessing.errors import record

__all__ = ["get_args_parser", "parse_args", "config_from_args", "determine_local_world_size", "run", "main",
           "parse_min_max_nnodes", "run_script_path"]

log = logging.getLogger("ember.distributed.run")
if not log.handlers:
    # torch's launcher logs its warnings (OMP_NUM_THREADS, stopped workers) to stderr, bare
    _h = logging.StreamHandler(sys.stderr)
    _h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.WARNING)
    log.propagate = False
    for _name in ("ember.distributed.elastic.agent",):
        _l = logging.getLogger(_name)
        _l.addHandler(_h)
        _l.setLevel(logging.WARNING)
        _l.propagate = False


class _Env(Action):
    """An option whose default may come from ``PET_<DEST>`` (torchrun's convention)."""

    def __init__(self, dest, default=None, required=False, **kwargs):
        env_val = os.environ.get(f"PET_{dest.upper()}")
        if env_val is not None:
            default, required = env_val, False
        super().__init__(dest=dest, default=default, required=required, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _EnvFlag(Action):
    """A store-true flag that ``PET_<DEST>=1`` also sets."""

    def __init__(self, dest, default=False, **kwargs):
        default = bool(int(os.environ.get(f"PET_{dest.upper()}", "1" if default else "0")))
        super().__init__(dest=dest, const=True, default=default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


def _csv(value):
    return [v for v in value.split(",") if v]


def get_args_parser() -> ArgumentParser:
    """torchrun's argument parser (same options, dashes or underscores)."""
    p = ArgumentParser(description="Torch Distributed Elastic Training Launcher (ember)")
    add = p.add_argument
    add("--nnodes", action=_Env, type=str, default="1:1",
        help="Number of nodes, or MIN:MAX. ember launches on one node only: must be 1.")
    add("--nproc-per-node", "--nproc_per_node", action=_Env, type=str, default="1",
        help="Number of workers per node; an int, or 'cpu'/'auto' (number of CPUs).")
    add("--rdzv-backend", "--rdzv_backend", action=_Env, type=str, default="static",
        help="Rendezvous backend: 'static' or 'c10d' (one node).")
    add("--rdzv-endpoint", "--rdzv_endpoint", action=_Env, type=str, default="",
        help="host[:port] the rendezvous store is served on.")
    add("--rdzv-id", "--rdzv_id", action=_Env, type=str, default="none", help="User-defined run id.")
    add("--rdzv-conf", "--rdzv_conf", action=_Env, type=str, default="",
        help="Rendezvous configuration (<key1>=<value1>,<key2>=<value2>,...).")
    add("--standalone", action=_EnvFlag,
        help="Single-node job with a private rendezvous store on a free port; --rdzv-backend, "
             "--rdzv-endpoint and --rdzv-id are auto-assigned.")
    add("--max-restarts", "--max_restarts", action=_Env, type=int, default=0,
        help="Maximum number of worker group restarts before failing.")
    add("--monitor-interval", "--monitor_interval", action=_Env, type=float, default=0.1,
        help="Seconds between checks of the workers' state.")
    add("--start-method", "--start_method", action=_Env, type=str, default="spawn",
        choices=["spawn", "fork", "forkserver"], help="Accepted for compatibility: workers are subprocesses.")
    add("--event-log-handler", "--event_log_handler", action=_Env, type=str, default="null",
        help="Accepted for compatibility; events are not logged.")
    add("--role", action=_Env, type=str, default="default", help="User-defined role for the workers.")
    add("-m", "--module", action=_EnvFlag,
        help="Run the training script as a module (python -m); cannot be used with --no-python.")
    add("--no-python", "--no_python", action=_EnvFlag,
        help="Run the training script as an executable, without prepending 'python'.")
    add("--run-path", "--run_path", action=_EnvFlag,
        help="Run the training script with runpy.run_path in the worker interpreter.")
    add("--log-dir", "--log_dir", action=_Env, type=str, default=None,
        help="Base directory for the per-attempt, per-rank log files and error files.")
    add("-r", "--redirects", action=_Env, type=str, default="0",
        help="Redirect streams to log files: 0 none, 1 stdout, 2 stderr, 3 both; or per local rank, e.g. 0:1,1:2.")
    add("-t", "--tee", action=_Env, type=str, default="0",
        help="Write streams to log files and the console (lines prefixed [role<local_rank>]:); same format as "
             "--redirects.")
    add("--local-ranks-filter", "--local_ranks_filter", action=_Env, type=str, default="",
        help="Only show these local ranks' output on the console, e.g. 0,1.")
    add("--duplicate-stdout-filters", "--duplicate_stdout_filters", action=_Env, type=_csv, default=[],
        help="Not supported by ember (must be empty).")
    add("--duplicate-stderr-filters", "--duplicate_stderr_filters", action=_Env, type=_csv, default=[],
        help="Not supported by ember (must be empty).")
    add("--node-rank", "--node_rank", type=int, action=_Env, default=0, help="Rank of this node (must be 0).")
    add("--master-addr", "--master_addr", default="127.0.0.1", type=str, action=_Env,
        help="Address the rendezvous store is served on (static backend).")
    add("--master-port", "--master_port", default=None, type=int, action=_Env,
        help="Port of the rendezvous store (static backend); 0 picks a free port.")
    add("--local-addr", "--local_addr", default=None, type=str, action=_Env, help="Accepted for compatibility.")
    add("--logs-specs", "--logs_specs", default=None, type=str,
        help="Not supported by ember (torchrun.logs_specs entry points).")
    add("--numa-binding", "--numa_binding", type=str, default=None, help="Not supported by ember.")
    add("--signals-to-handle", "--signals_to_handle", action=_Env, type=str, default="SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        help="Signals on which the launcher stops its workers.")
    add("--shutdown-timeout", "--shutdown_timeout", action=_Env, type=int, default=None,
        help="Seconds between SIGTERM and SIGKILL when stopping workers (default 30).")
    add("--virtual-local-rank", "--virtual_local_rank", action=_EnvFlag, help="Not supported by ember.")
    add("training_script", type=str,
        help="The training program/script (or module with -m) and its arguments follow.")
    add("training_script_args", nargs=REMAINDER)
    return p


def parse_args(args=None):
    """Parse torchrun's command line (``sys.argv[1:]`` when ``args`` is None)."""
    return get_args_parser().parse_args(args)


def parse_min_max_nnodes(nnodes: str):
    parts = nnodes.split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')


def determine_local_world_size(nproc_per_node: str) -> int:
    """``--nproc-per-node``: an int, or ``cpu``/``auto`` (the CPUs this process may use; ember has no
    accelerators, so ``auto`` means CPUs as torch does without one)."""
    try:
        return int(nproc_per_node)
    except ValueError as e:
        if nproc_per_node in ("cpu", "auto"):
            try:
                return len(os.sched_getaffinity(0))
            except AttributeError:
                return os.cpu_count() or 1
        if nproc_per_node in ("gpu", "xpu"):
            raise ValueError("Cuda is not available." if nproc_per_node == "gpu" else "Xpu is not available.") from e
        raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}") from e


def _parse_std(value, nproc, option):
    """``--redirects``/``--tee``: ``N`` for every local rank or ``rank:N,...`` (N in 0..3)."""
    value = value.strip()
    if re.fullmatch(r"[0-3]", value):
        return {lr: int(value) for lr in range(nproc)}
    if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", value):
        return {int(k): int(v) for k, v in (item.split(":") for item in value.split(","))}
    raise ValueError(f"--{option}: expected 0, 1, 2 or 3 (none, stdout, stderr, both) or a per-local-rank mapping "
                     f"like 0:1,1:2, got {value!r}")


def _parse_rdzv_conf(conf):
    """``--rdzv-conf key=value,...``: checked for form only -- its keys (join/last-call/close
    timeouts, is_host, store type) tune multi-node rendezvous, which one node does not need."""
    out = {}
    for item in filter(None, (c.strip() for c in conf.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--rdzv-conf: expected <key1>=<value1>,<key2>=<value2>,..., got the item {item!r}")
        out[key] = value
    return out


def _split_endpoint(endpoint, default_port):
    host, sep, port = endpoint.rpartition(":")
    if not sep:
        return endpoint, default_port
    return host.strip("[]"), int(port)


def config_from_args(args):
    """``(WorkerSpec, store host, store port)`` from parsed arguments; checks what ember's
    single-node launcher cannot do."""
    min_nodes, max_nodes = parse_min_max_nnodes(args.nnodes)
    if not 0 < min_nodes <= max_nodes:
        raise AssertionError(f"min_nodes must be > 0 and <= max_nodes, got min_nodes={min_nodes}, "
                             f"max_nodes={max_nodes}")
    if max_nodes != 1:
        raise NotImplementedError(f"ember.distributed.run: multi-node launch (--nnodes={args.nnodes}) is not "
                                  f"supported; ember launches the workers of one node (--nnodes=1)")
    if args.node_rank != 0:
        raise NotImplementedError(f"ember.distributed.run: --node-rank={args.node_rank} needs a multi-node launch, "
                                  f"which is not supported (single node: --node-rank=0)")
    if args.rdzv_backend not in ("static", "c10d"):
        raise NotImplementedError(f"ember.distributed.run: rendezvous backend {args.rdzv_backend!r} is not supported "
                                  f"(ember has 'static' and 'c10d' on one node)")
    if args.max_restarts < 0:
        raise AssertionError("max_restarts must be >= 0")
    if args.monitor_interval <= 0:
        raise ValueError(f"--monitor-interval must be positive, got {args.monitor_interval}")
    for opt, val in (("duplicate-stdout-filters", args.duplicate_stdout_filters),
                     ("duplicate-stderr-filters", args.duplicate_stderr_filters)):
        if val:
            raise NotImplementedError(f"ember.distributed.run: --{opt} is not supported")
    for opt, val in (("logs-specs", args.logs_specs), ("numa-binding", args.numa_binding)):
        if val is not None:
            raise NotImplementedError(f"ember.distributed.run: --{opt} is not supported")
    if args.virtual_local_rank:
        raise NotImplementedError("ember.distributed.run: --virtual-local-rank is not supported")

    _parse_rdzv_conf(args.rdzv_conf)
    nproc = determine_local_world_size(args.nproc_per_node)
    if nproc <= 0:
        raise ValueError(f"--nproc-per-node must be positive, got {nproc}")
    extra_env = {}
    if "OMP_NUM_THREADS" not in os.environ and nproc > 1:
        log.warning("\n*****************************************\n"
                    "Setting OMP_NUM_THREADS environment variable for each process to be %s in default, to avoid your "
                    "system being overloaded, please further tune the variable for optimal performance in your "
                    "application as needed. \n*****************************************", 1)
        extra_env["OMP_NUM_THREADS"] = "1"

    if args.rdzv_backend == "static" and not args.rdzv_endpoint:
        host, port = args.master_addr, args.master_port
    else:
        host, port = _split_endpoint(args.rdzv_endpoint or "localhost", 29400)

    ranks_filter = None
    if args.local_ranks_filter:
        try:
            ranks_filter = set(map(int, args.local_ranks_filter.split(",")))
        except ValueError as e:
            raise ValueError("--local_ranks_filter must be a comma-separated list of integers e.g. "
                             "--local_ranks_filter=0,1,2") from e

    use_env = getattr(args, "use_env", True)
    if args.run_path:
        # runpy.run_path in a fresh interpreter: the script runs as __main__ with sys.argv[0] its path
        cmd = [sys.executable, "-u", "-c",
               "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
               args.training_script]
        name = "run_script_path"
    elif not args.no_python:
        cmd = [os.getenv("PYTHON_EXEC", sys.executable), "-u"] + (["-m"] if args.module else [])
        cmd.append(args.training_script)
        name = args.training_script
    else:
        if args.module:
            raise ValueError("Don't use both the '--no-python' flag and the '--module' flag at the same time.")
        cmd = [args.training_script]
        name = args.training_script
    if not use_env:
        cmd.append(f"--local-rank={LOCAL_RANK_MACRO}")
    cmd.extend(args.training_script_args)

    spec = WorkerSpec(
        cmd=cmd, name=name, nproc=nproc, run_id=args.rdzv_id, role=args.role, max_restarts=args.max_restarts,
        monitor_interval=args.monitor_interval, master_addr=host, master_port=port, log_dir=args.log_dir,
        redirects=_parse_std(args.redirects, nproc, "redirects"), tee=_parse_std(args.tee, nproc, "tee"),
        local_ranks_filter=ranks_filter, signals_to_handle=args.signals_to_handle, extra_env=extra_env,
        shutdown_timeout=30.0 if args.shutdown_timeout is None else float(args.shutdown_timeout))
    return spec


def run_script_path(training_script: str, *training_script_args: str):
    """Run ``training_script`` as ``__main__`` in this interpreter with the given argv."""
    import runpy
    sys.argv = [training_script, *training_script_args]
    runpy.run_path(sys.argv[0], run_name="__main__")


def run(args):
    """Launch and supervise the workers described by parsed ``args``; returns on success,
    raises ``ChildFailedError`` when they failed beyond ``--max-restarts``."""
    from .store import TCPStore

    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
        log.info("\n**************************************\nRendezvous info:\n--rdzv-backend=%s --rdzv-endpoint=%s "
                 "--rdzv-id=%s\n**************************************\n", args.rdzv_backend, args.rdzv_endpoint,
                 args.rdzv_id)
    elif args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None:
        if parse_min_max_nnodes(args.nnodes)[1] == 1:
            args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    if args.master_port is None:
        args.master_port = 29500
    spec = config_from_args(args)
    # the store serves every attempt; port 0 picks a free one, and the workers get the real one
    store = TCPStore(spec.master_addr, spec.master_port, is_master=True)
    try:
        spec.master_port = store.port
        LocalElasticAgent(spec, store).run()
    finally:
        store.close()


@record
def main(args=None):
    """torchrun's entry point: ``main(["--nproc-per-node=2", "train.py"])``."""
    run(parse_args(args))


if __name__ == "__main__":
    main()
