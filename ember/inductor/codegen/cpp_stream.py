"""Flat pointwise loops whose big float32 outputs go to memory with non-temporal stores.

Why. A plain store to a line that is not in cache first reads the line (read-for-ownership),
so a pointwise kernel writing a fresh 64 MB output moves 64 MB more than it must: 4/3 of the
traffic of ``(x * y + x).tanh()`` over two 64 MB inputs, 3/2 of a one-input chain's. glibc's
``memcpy`` avoids it for big copies with non-temporal stores, and the roofline's copy is one.
Rows of loop nests with inner loops are already streamed (``KernelGen._stream_plan``); this is
the same for the one-dimensional loops ``KernelGen`` emits for flat pointwise groups, as a
rewrite of the finished kernel body (after ``cpp_strips.strip_loops``, whose strips it reuses):

    #pragma omp parallel                     // was: parallel for [simd]
    {
    #pragma omp for nowait
    for (int64_t x0s = 0; x0s < N; x0s += S) {
        const int64_t x0t = std::min<int64_t>(x0s + S, N);
        alignas(64) float buf0_row[S];       // L1-resident staging strip
        #pragma omp simd
        for (int64_t x0 = x0s; x0 < x0t; ++x0) { ...; buf0_row[x0 - x0s] = v; }
        ember_stream_part(&buf0[x0s], buf0_row, x0t - x0s);
    }
    ember_stream_fence();                    // each thread's stores, before the region's barrier
    }

Measured on the 2-vCPU AVX2 EPYC (16M floats, compiled with and without, interleaved in one
process, medians of 25; outputs from the heap, ``ember/_malloc.py``): ``x + y`` 1.24x in two
runs, ``(x * 0.5).exp()`` 1.06-1.14x, ``(x * y + x).tanh()`` 0.99-1.05x.
Not for loops that call a math function per element (libmvec's vector ``logf``: unstaged,
GCC calls it from the SIMD loop): those are bound by compute, and the staging copy is more
work -- measured, the log chain 0.96x (interleaved in one process, three runs), while a
staged exp went 1.06-1.14x, the tanh program 0.99-1.05x and ``x + y`` 1.24x.
Only stores ``name[x0] = value;`` at the loop's own index into an output named by the caller
(a kernel-written float32 buffer of at least ``config.stream_min_bytes`` that aliases no input)
and mentioned nowhere else in the kernel are streamed: a load of it in the same kernel would
find the strip unwritten, or the line evicted.
"""
from __future__ import annotations

import re
from typing import List, Optional, Sequence

_PAR = re.compile(r"^(\s*)#pragma omp parallel for( simd)?(?P<rest>.*)$")
_FLAT = re.compile(r"^(\s*)for \(int64_t (\w+) = (.+); \2 < (.+); \+\+\2\) \{$")
_REGION = re.compile(r"(?:num_threads|if)\((?:[^()]|\([^()]*\))*\)")
_STRIPS = re.compile(r"^(\s*)for \(int64_t (\w+)s = (.+); \2s < (.+); \2s \+= (\d+)\) \{$")


def stream_flat_stores(lines: List[str], outputs: Sequence[str], strip: int,
                       heavy_call: Optional["re.Pattern"] = None) -> List[str]:
    """``lines`` (a kernel body) with the stores to ``outputs`` in flat parallel loops
    streamed (module docstring); loops of any other shape are left as they are, and so are
    loops calling ``heavy_call`` (a per-element math function: compute-bound, see above)."""
    if not outputs or strip <= 0:
        return lines
    text = "\n".join(ln for ln in lines if not ln.strip().startswith("//"))
    # names mentioned exactly once (their one store) in the whole body
    once = [nm for nm in outputs if len(re.findall(rf"\b{re.escape(nm)}\b", text)) == 1]
    if not once:
        return lines
    out: List[str] = []
    i, n = 0, len(lines)
    while i < n:
        m = _PAR.match(lines[i])
        if m and i + 1 < n and "reduction(" not in m.group("rest") and "collapse(" not in m.group("rest"):
            end = _closing(lines, i + 1)
            if end is not None:
                loop = lines[i + 1:end + 1]
                heavy = heavy_call is not None and any(heavy_call.search(ln) for ln in loop)
                new = None if heavy else _rewrite(m, loop, once, strip)
                if new is not None:
                    out.extend(new)
                    i = end + 1
                    continue
        out.append(lines[i])
        i += 1
    return out


def _closing(lines: List[str], k: int) -> Optional[int]:
    """Index of the brace closing the ``for`` at ``lines[k]`` (same indentation)."""
    ind = re.match(r"^(\s*)", lines[k]).group(1)
    for j in range(k + 1, len(lines)):
        if lines[j] == ind + "}":
            return j
        if lines[j].strip() and not lines[j].startswith(ind + " "):
            return None
    return None


def _rewrite(pm, loop: List[str], names: Sequence[str], strip: int) -> Optional[List[str]]:
    ind, rest = pm.group(1), pm.group("rest")
    f = _FLAT.match(loop[0])
    s = _STRIPS.match(loop[0])
    if f and pm.group(2):            # one simd loop: strip it first
        v, lo, hi = f.group(2), f.group(3), f.group(4)
        body = loop[1:-1]
        if any("{" in b or "}" in b or b.strip().startswith("#") for b in body):
            return None
        i2 = ind + "    "
        loop = ([f"{ind}for (int64_t {v}s = {lo}; {v}s < {hi}; {v}s += {strip}) {{",
                 f"{i2}const int64_t {v}t = std::min<int64_t>({v}s + {strip}, {hi});",
                 f"{i2}#pragma omp simd",
                 f"{i2}for (int64_t {v} = {v}s; {v} < {v}t; ++{v}) {{"]
                + ["    " + b for b in body] + [f"{i2}}}", f"{ind}}}"])
        S = strip
    elif s and not pm.group(2):      # strips of cpp_strips.strip_loops
        v, lo, hi, S = s.group(2), s.group(3), s.group(4), int(s.group(5))
    else:
        return None
    # stores at the loop's own index, in the strip's inner simd loops (one level below)
    store = {nm: re.compile(rf"^(\s*){re.escape(nm)}\[{v}\] = (.+);$") for nm in names}
    hits = []
    for k, ln in enumerate(loop):
        for nm, pat in store.items():
            if pat.match(ln):
                hits.append((k, nm))
    if not hits:
        return None
    if any(not loop[k].startswith(ind + "        ") for k, _ in hits):
        return None
    streamed = sorted({nm for _, nm in hits})
    body = list(loop)
    for k, nm in hits:
        mm = store[nm].match(body[k])
        body[k] = f"{mm.group(1)}{nm}_row[{v} - {v}s] = {mm.group(2)};"
    i2 = ind + "    "
    # strips end on the first output's 64-byte lines (the first strip at its first line): a
    # line written partly by two strips is two partial non-temporal writes, each a read of
    # the line (a heap array starts 16 bytes into a line; such strips made the log chain
    # 1.35x slower)
    first = streamed[0]
    align = f"{v}h"
    head = [f"{ind}for (int64_t {v}a = {lo} + ({align} ? {align} - {S} : 0); {v}a < {hi}; {v}a += {S}) {{",
            f"{i2}const int64_t {v}s = std::max<int64_t>({v}a, {lo});",
            f"{i2}const int64_t {v}t = std::min<int64_t>({v}a + {S}, {hi});"]
    head += [f"{i2}alignas(64) float {nm}_row[{S}];" for nm in streamed]
    tail = [f"{i2}ember_stream_part(&{nm}[{v}s], {nm}_row, {v}t - {v}s);" for nm in streamed]
    # num_threads and if clauses belong to the region, the schedule to the loop
    region = "".join(" " + c for c in _REGION.findall(rest))
    loop_clauses = "".join(" " + c for c in _REGION.sub("", rest).split())
    line = f"((64 - (reinterpret_cast<uintptr_t>(&{first}[{lo}]) & 63)) & 63) / 4"
    return ([f"{ind}const int64_t {align} = std::min<int64_t>({line}, ({hi}) - ({lo}));",
             f"{ind}#pragma omp parallel{region}", f"{ind}{{", f"{ind}#pragma omp for{loop_clauses} nowait"]
            + head + body[2:-1] + tail + [body[-1], f"{ind}ember_stream_fence();", f"{ind}}}"])
