"""The worker-group agent behind ``ember.distributed.run`` (torchrun): start ``nproc`` worker
processes with torchelastic's environment, watch them, and on a failure stop the rest and
restart the whole group (up to ``max_restarts``) or report the failure.

Why a whole-group restart: collectives need every rank, so one dead rank leaves the others
blocked; the only consistent recovery is a fresh group (a new attempt) that resumes from
the script's own checkpoint. Workers rendezvous through a ``TCPStore`` this agent serves for
the whole run (``TORCHELASTIC_USE_AGENT_STORE=True``); each attempt's keys live under
``/worker/attempt_<n>``, so a restarted group never reads a failed attempt's keys and the
port stays the same across restarts."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .multiprocessing.errors import ChildFailedError, ProcessFailure

log = logging.getLogger("ember.distributed.elastic.agent")

LOCAL_RANK_MACRO = "${local_rank}"   # in a worker's argv: replaced by its local rank (launch's --local-rank)
STDOUT, STDERR = 1, 2          # torch's Std flags: 0 none, 1 stdout, 2 stderr, 3 both


@dataclass
class WorkerSpec:
    """What to run and how: ``cmd`` (argv of one worker), ``name`` (the entry point's name in
    failure reports), the per-local-rank stream modes, and the restart policy."""

    cmd: list
    name: str
    nproc: int
    run_id: str = "none"
    role: str = "default"
    max_restarts: int = 0
    monitor_interval: float = 0.1
    master_addr: str = "localhost"
    master_port: int = 0
    log_dir: str | None = None
    redirects: dict = field(default_factory=dict)    # local rank -> Std flags written to a file only
    tee: dict = field(default_factory=dict)          # local rank -> Std flags written to a file and the console
    local_ranks_filter: set | None = None            # console shows only these local ranks
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    extra_env: dict = field(default_factory=dict)    # set in every worker (e.g. OMP_NUM_THREADS)
    shutdown_timeout: float = 30.0                   # SIGTERM -> SIGKILL grace period


class SignalException(Exception):
    """The launcher itself received a termination signal; its workers were stopped."""

    def __init__(self, msg, sigval):
        super().__init__(msg)
        self.sigval = sigval


def _pump(src, dst_file, console, prefix):
    """Copy a worker's stream line by line to its log file and (tee) the console, prefixed."""
    for line in iter(src.readline, b""):
        if dst_file is not None:
            dst_file.write(line)
            dst_file.flush()
        if console is not None:
            console.write(prefix + line.decode("utf-8", "replace"))
            console.flush()
    src.close()


class _Worker:
    def __init__(self, local_rank, proc, error_file, files, threads):
        self.local_rank, self.proc, self.error_file = local_rank, proc, error_file
        self.files, self.threads = files, threads
        # when the process ended, taken by a thread waiting on it: two workers found dead in one
        # monitoring pass (one exited, its peer's collective then failed) are reported in the
        # order they ended, so the root cause is the one that ended first
        self.exit_time = None
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        self.proc.wait()
        self.exit_time = time.monotonic()

    def finish_io(self):
        for t in self.threads:
            t.join(5)
        for f in self.files:
            f.close()


class LocalElasticAgent:
    """Runs one node's worker group to completion (``run()``), serving the rendezvous store."""

    def __init__(self, spec: WorkerSpec, store):
        self.spec = spec
        self.store = store
        self.restart_count = 0
        self.workers: list[_Worker] = []
        base = spec.log_dir or tempfile.mkdtemp(prefix="emberelastic_")
        os.makedirs(base, exist_ok=True)
        self.log_dir = tempfile.mkdtemp(prefix=f"{spec.run_id}_", dir=base)

    # -- one attempt -------------------------------------------------------------------------------
    def _env(self, local_rank, error_file):
        s = self.spec
        env = dict(os.environ)
        env.update(s.extra_env)
        env.update({
            "LOCAL_RANK": str(local_rank), "RANK": str(local_rank), "GROUP_RANK": "0",
            "ROLE_RANK": str(local_rank), "ROLE_NAME": s.role, "LOCAL_WORLD_SIZE": str(s.nproc),
            "WORLD_SIZE": str(s.nproc), "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": str(s.nproc),
            "MASTER_ADDR": s.master_addr, "MASTER_PORT": str(s.master_port),
            "TORCHELASTIC_RESTART_COUNT": str(self.restart_count),
            "TORCHELASTIC_MAX_RESTARTS": str(s.max_restarts), "TORCHELASTIC_RUN_ID": s.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            "TORCHELASTIC_ERROR_FILE": error_file, "TORCHELASTIC_SIGNALS_TO_HANDLE": s.signals_to_handle,
        })
        return env

    def _stream(self, local_rank, which, wdir):
        """(Popen argument, log file to close, thread pumping it) for stdout or stderr."""
        s = self.spec
        flag = STDOUT if which == "stdout" else STDERR
        console = sys.stdout if which == "stdout" else sys.stderr
        shown = s.local_ranks_filter is None or local_rank in s.local_ranks_filter
        to_file = bool((s.redirects.get(local_rank, 0) | s.tee.get(local_rank, 0)) & flag)
        tee = bool(s.tee.get(local_rank, 0) & flag) and shown
        if not to_file:
            return (None if shown else subprocess.DEVNULL), None, None
        f = open(os.path.join(wdir, f"{which}.log"), "wb")
        if not tee:
            return f, f, None
        return subprocess.PIPE, f, console

    def _start_workers(self):
        s = self.spec
        adir = os.path.join(self.log_dir, f"attempt_{self.restart_count}")
        self.workers = []
        for lr in range(s.nproc):
            wdir = os.path.join(adir, str(lr))
            os.makedirs(wdir, exist_ok=True)
            error_file = os.path.join(wdir, "error.json")
            out, out_f, out_console = self._stream(lr, "stdout", wdir)
            err, err_f, err_console = self._stream(lr, "stderr", wdir)
            cmd = [a.replace(LOCAL_RANK_MACRO, str(lr)) for a in s.cmd]
            proc = subprocess.Popen(cmd, env=self._env(lr, error_file), stdout=out, stderr=err)
            files, threads = [f for f in (out_f, err_f) if f is not None], []
            prefix = f"[{s.role}{lr}]:"
            for pipe, f, con in ((proc.stdout, out_f, out_console), (proc.stderr, err_f, err_console)):
                if pipe is not None:
                    t = threading.Thread(target=_pump, args=(pipe, f, con, prefix), daemon=True)
                    t.start()
                    threads.append(t)
            self.workers.append(_Worker(lr, proc, error_file, files, threads))

    def _stop_workers(self):
        """SIGTERM every live worker, SIGKILL what is still alive after the grace period."""
        for w in self.workers:
            if w.proc.poll() is None:
                log.warning("Sending process %s closing signal %s", w.proc.pid, "SIGTERM")
                w.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.spec.shutdown_timeout
        for w in self.workers:
            try:
                w.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("Unable to shutdown process %s via SIGTERM, forcefully exiting via SIGKILL", w.proc.pid)
                w.proc.kill()
                w.proc.wait()
        for w in self.workers:
            w.finish_io()

    def _monitor(self):
        """Poll until every worker succeeded ("SUCCEEDED") or one failed (then stop the rest and
        return "FAILED" with the failures, the stopped workers included, as torch reports)."""
        while True:
            time.sleep(self.spec.monitor_interval)
            codes = [w.proc.poll() for w in self.workers]
            if any(c not in (None, 0) for c in codes):
                first = [w for w, c in zip(self.workers, codes) if c not in (None, 0)]
                deadline = time.monotonic() + 0.5       # (the waiter sets it right after reaping)
                while any(w.exit_time is None for w in first) and time.monotonic() < deadline:
                    time.sleep(0.001)
                first.sort(key=lambda w: w.exit_time if w.exit_time is not None else float("inf"))
                for w in first:
                    log.error("failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s", w.proc.returncode,
                              w.local_rank, w.proc.pid, self.spec.cmd[0])
                failed_first = {w.local_rank: ProcessFailure(w.local_rank, w.proc.pid, w.proc.returncode,
                                                             w.error_file) for w in first}
                self._stop_workers()
                # the first observed failures first: on equal (whole-second) timestamps the root cause is
                # the earliest inserted, as torch; then the workers stopped because of them
                failures = dict(failed_first)
                for w in self.workers:
                    if w.local_rank not in failures and w.proc.returncode != 0:
                        failures[w.local_rank] = ProcessFailure(w.local_rank, w.proc.pid, w.proc.returncode,
                                                                w.error_file)
                return "FAILED", failures
            if all(c == 0 for c in codes):
                for w in self.workers:
                    w.finish_io()
                return "SUCCEEDED", {}

    # -- the run ----------------------------------------------------------------------------------
    def _on_signal(self, signum, frame):
        raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))

    def run(self):
        """Run attempts until success (returns) or failures beyond ``max_restarts``
        (raises ``ChildFailedError``). A termination signal stops the workers and raises
        ``SignalException``."""
        s = self.spec
        old = {}
        in_main = threading.current_thread() is threading.main_thread()
        for name in s.signals_to_handle.split(","):
            sig = getattr(signal, name.strip(), None)
            if in_main and sig is not None:
                old[sig] = signal.signal(sig, self._on_signal)
        try:
            while True:
                self._start_workers()
                state, failures = self._monitor()
                if state == "SUCCEEDED":
                    return
                left = s.max_restarts - self.restart_count
                if left <= 0:
                    raise ChildFailedError(s.name, failures)
                log.info("[%s] Worker group FAILED. %s/%s attempts left; will restart worker group", s.role, left,
                         s.max_restarts)
                self.restart_count += 1
        except SignalException as e:
            log.warning("Received %s death signal, shutting down workers", e.sigval)
            self._stop_workers()
            raise
        except BaseException:
            self._stop_workers()     # e.g. the second worker could not start: never leave the first behind
            raise
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
