"""``python -m ember.runtime.triton_aot``: compile generated Triton kernels ahead
of time, in a process of its own (see ``triton_driver.aot_compile``).

Reads ``{"target": [backend, arch, warp_size], "jobs": [...]}`` (JSON) from
stdin, compiles every (kernel, config) with ``triton.compile`` for that target
(kernels identical up to names -- one per transformer layer -- once)
-- PTX, then a cubin with the ptxas Triton ships -- writes the PTX next to the
kernel source (``<module dir>/<target>/<kernel>_<config>.ptx``) and prints one
JSON list of results as the last line of stdout. A kernel that fails to
compile is reported with Triton's error, not raised, so one run reports all.
"""
from __future__ import annotations

import json
import os
import sys


def main():
    req = json.loads(sys.stdin.read())
    from triton.backends.compiler import GPUTarget

    from .triton_driver import KernelModule, compile_for_target

    backend, arch, warp = req["target"]
    target = GPUTarget(backend, int(arch), int(warp))
    modules = {}
    results = []

    class _Spec:  # what compile_for_target reads
        def __init__(self, job):
            self.signature = lambda: job["signature"]
            self.params = [k for k, v in job["signature"].items() if v.startswith("*")]
            self.aligned = {self.params[i] for i in job["aligned"]}

    done = {}  # (dedupe key, config) -> result of the kernel compiled for it
    for job in req["jobs"]:
        path = job["path"]
        if path not in modules:
            with open(path) as f:
                modules[path] = KernelModule(f.read())
        mod = modules[path]
        fn = mod.namespace("compile")[job["name"]]
        spec = _Spec(job)
        for i, cfg in enumerate(job["configs"]):
            res = {"name": job["name"], "config": cfg, "ok": False}
            dkey = (job.get("key"), json.dumps(cfg, sort_keys=True))
            if dkey[0] is not None and dkey in done:
                results.append({**done[dkey], "name": job["name"], "same_as": done[dkey]["name"]})
                continue
            try:
                ck = compile_for_target(fn, spec, cfg, target)
                ptx = ck.asm["ptx"]
                res.update(ok=True, ptx_bytes=len(ptx), cubin_bytes=len(ck.asm.get("cubin", b"")),
                           shared=ck.metadata.shared)
                if req.get("write_ptx", True):     # (precompile's workers only fill Triton's cache)
                    out_dir = os.path.join(mod.dir, f"{backend}{arch}")
                    os.makedirs(out_dir, exist_ok=True)
                    res["ptx_path"] = ptx_path = os.path.join(out_dir, f"{job['name']}_{i}.ptx")
                    with open(ptx_path, "w") as f:
                        f.write(ptx)
            except Exception as e:  # noqa: BLE001 - reported per kernel
                res["error"] = f"{type(e).__name__}: {e}"
            done[dkey] = res
            results.append(res)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
