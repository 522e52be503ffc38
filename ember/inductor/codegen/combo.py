"""Combo kernels: consecutive independent C++ kernels run in one OpenMP parallel region.

Why. Every ``#pragma omp parallel for`` wakes the thread pool; with ember's passive wait
policy (idle OpenMP threads sleep, so they never steal cores from BLAS or the Python thread)
a wake-up costs tens of microseconds -- measured on the 2-core box: 60 us per region on top of
the work. A compiled optimizer step is one small kernel per parameter, all independent (40
regions for the benchmark's AdamW); so are the bias and norm-weight gradient sums of a
backward. A combo kernel runs such a run of kernels in one region, each loop nest a
``#pragma omp for nowait`` worksharing loop (threads move on to the next nest without a
barrier; the region's end is the only one).

Legality. Members are consecutive in the schedule (no extern call between them) and
pairwise independent: none reads or writes memory another writes (in-place outputs count as
the input memory they overwrite). A member must be a plain parallel loop nest: optional
``const`` declarations, then one ``#pragma omp parallel for`` (optionally ``simd``, ``collapse``) loop and
nothing after it; no runtime ``if`` clause (symbolic sizes), no reduction clause, no index-error
check. A member may instead be straight-line code (no OpenMP work-sharing, no ``return``): a
size-() kernel such as an optimizer's step count, run by one thread as an ``omp single
nowait`` block (40 such kernels after the benchmark's AdamW were 40 calls from the wrapper;
a run of only such members is one plain function, no parallel region). The wrapper treats
the combo as one group: every member's output is allocated before the call and every input
stays live until after it.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .. import config
from ..scheduler import FusedGroup

_WORKSHARE = re.compile(r"#pragma omp (?!simd)")
_SEQUENTIAL = "<sequential>"   # first body line of a member that runs on one thread
_PRAGMA = re.compile(r"^    #pragma omp parallel for( simd)?( collapse\(\d+\))?( schedule\(dynamic, \d+\))?"
                     r"( num_threads\(\d+\))?$")


class ComboGroup(FusedGroup):
    """Several fused groups run by one combo kernel (the wrapper sees one group)."""

    def __init__(self, members: Sequence[FusedGroup]):
        super().__init__([n for m in members for n in m.nodes], members[0].p)
        self.members = list(members)

    def __repr__(self):
        return f"ComboGroup({', '.join(repr(m) for m in self.members)})"


def _split(src: str) -> Optional[Tuple[List[str], List[str], List[str]]]:
    """(params, unpack lines, body lines) of a kernel ``_finish`` produced, or None when its
    body is not a single combinable parallel loop nest."""
    lines = src.rstrip("\n").split("\n")
    if len(lines) < 4 or lines[1] != "{" or lines[-1] != "}":
        return None
    m = re.match(r'^extern "C" void \w+\((.*)\)$', lines[0])
    if m is None:
        return None
    params = [p.strip() for p in m.group(1).split(",")] if m.group(1) else []
    inner = lines[2:-1]
    n_unpack = 0
    while n_unpack < len(inner) and "EMBER_DATA(" in inner[n_unpack]:
        n_unpack += 1
    unpack, body = inner[:n_unpack], inner[n_unpack:]
    prag = [i for i, ln in enumerate(body) if "#pragma omp parallel" in ln]
    if not prag:
        # straight-line code (a size-() kernel: an optimizer's step count): one thread runs it
        # as an ``omp single nowait`` block; nothing in it may leave the block or share work
        if any(_WORKSHARE.search(ln) or re.search(r"\b(return|goto)\b", ln) for ln in body):
            return None
        return params, unpack, [_SEQUENTIAL] + body
    if len(prag) != 1 or not _PRAGMA.match(body[prag[0]]):
        return None
    i = prag[0]
    if any(not (ln.startswith("    const ") or ln.strip().startswith("//")) for ln in body[:i]):
        return None
    if i + 1 >= len(body) or not body[i + 1].startswith("    for ("):
        return None
    # the loop nest closes on the last line: nothing at the top level after it
    depth = 0
    for j in range(i + 1, len(body)):
        depth += body[j].count("{") - body[j].count("}")
        if depth == 0 and j != len(body) - 1 and j > i + 1:
            return None
    if body[-1] != "    }":
        return None
    return params, unpack, body


def _mem(names: Set[str], inplace: Dict[str, str]) -> Set[str]:
    return {inplace.get(n, n) for n in names}


def _independent(a: FusedGroup, b: FusedGroup, inplace: Dict[str, str]) -> bool:
    wa, wb = _mem(a.names(), inplace), _mem(b.names(), inplace)
    ra, rb = _mem(a.read_names() - a.names(), inplace), _mem(b.read_names() - b.names(), inplace)
    return not (wa & (wb | rb)) and not (wb & ra)


def combine(groups, kernels: Dict[int, str], names: Dict[int, str], params: Dict[int, list],
            prof: Dict[int, tuple], checks: Set[int], inplace: Dict[str, str]):
    """Merge runs of combinable kernels. ``kernels``/``names``/``params``/``prof`` map a
    group index to its kernel source, name, parameter names and profile info; returns them
    re-indexed for the new group list: (groups, kernels, names, params, prof, checks)."""
    if not config.combo_kernels:
        return groups, kernels, names, params, prof, checks
    parts = {gi: _split(src) for gi, src in kernels.items() if gi not in checks}
    runs: List[List[int]] = []
    for gi, grp in enumerate(groups):
        ok = parts.get(gi) is not None and type(grp) is FusedGroup
        cur = runs[-1] if runs else None
        if ok and cur is not None and parts.get(cur[-1]) is not None and \
                len(cur) < config.combo_max_kernels and \
                all(_independent(groups[j], grp, inplace) for j in cur):
            cur.append(gi)
        else:
            runs.append([gi])
    out_groups, out_k, out_n, out_p, out_prof, out_checks = [], {}, {}, {}, {}, set()
    for run in runs:
        ni = len(out_groups)
        if len(run) == 1:
            gi = run[0]
            out_groups.append(groups[gi])
            if gi in kernels:
                out_k[ni], out_n[ni], out_p[ni], out_prof[ni] = kernels[gi], names[gi], params[gi], prof[gi]
            if gi in checks:
                out_checks.add(ni)
            continue
        cname = "combo_" + names[run[0]]
        src, plist = _assemble(cname, [(names[gi], parts[gi]) for gi in run])
        out_groups.append(ComboGroup([groups[gi] for gi in run]))
        out_k[ni], out_n[ni], out_p[ni] = src, cname, plist
        kinds = {prof[gi][0] for gi in run}
        out_prof[ni] = ("combo " + "/".join(sorted(kinds)), [o for gi in run for o in prof[gi][1]])
    return out_groups, out_k, out_n, out_p, out_prof, out_checks


def _assemble(cname: str, members) -> Tuple[str, List[str]]:
    """One kernel running the members' loop nests as ``omp for nowait`` in one region."""
    seen: Dict[str, str] = {}
    sizes: List[str] = []
    unpack: List[str] = []
    order: List[str] = []
    for _, (params, unp, _body) in members:
        for p in params:
            if p.startswith("void* "):
                nm = p[len("void* "):-len("_obj")]
                if nm not in seen:
                    seen[nm] = p
                    order.append(nm)
            elif p not in sizes:
                sizes.append(p)
        for ln in unp:
            if ln not in unpack:
                unpack.append(ln)
    threads = ""
    body = ["    #pragma omp parallel" + threads, "    {"]
    for kname, (_, _, b) in members:
        body.append(f"        {{  // {kname}")
        if b and b[0] == _SEQUENTIAL:
            body.append("            #pragma omp single nowait")
            body.append("            {")
            body.extend("            " + ln for ln in b[1:])
            body.append("            }")
            body.append("        }")
            continue
        for ln in b:
            m = _PRAGMA.match(ln)
            if m:
                if m.group(4):
                    threads = m.group(4)
                sched = (m.group(3) or " schedule(static)").strip()
                ln = "    #pragma omp for" + (m.group(1) or "") + f" {sched} nowait" + (m.group(2) or "")
            body.append("        " + ln)
        body.append("        }")
    body.append("    }")
    body[0] = "    #pragma omp parallel" + threads
    if all(b and b[0] == _SEQUENTIAL for _, (_, _, b) in members):
        # only straight-line members: no thread pool to wake, the blocks run in turn
        body = [ln.replace("#pragma omp single nowait", "// sequential") for ln in body[2:-1]]
    head = f'extern "C" void {cname}({", ".join([seen[n] for n in order] + sizes)})'
    # the wrapper passes reads then writes, by name: keep _finish's parameter naming
    return head + "\n{\n" + "\n".join(unpack + body) + "\n}\n", order
