"""``node.meta["stack_trace"]`` for exported graphs: the source lines that made each node.

During export's dynamo capture every operator node records the chain of frames being traced
when it was created (the user's ``forward``, then the inlined calls down to the op), in the
form torch prints: ``File "<file>", line N, in <func>\\n    <code>`` per frame, outermost
first. The export's own entry frame is left out. Errors (ONNX translation) quote these lines,
so a user sees which line of their model produced an unsupported op."""
from __future__ import annotations

import linecache
import sys
from typing import List, Optional


def _translator_frames():
    """The dynamo translators running now, innermost first (read from the Python stack: each
    ``InstructionTranslator.run`` frame holds one; inlined calls nest them)."""
    from ..dynamo.symbolic_convert import InstructionTranslator
    run_code = InstructionTranslator.run.__code__
    f = sys._getframe(1)
    out = []
    while f is not None:
        if f.f_code is run_code:
            tx = f.f_locals.get("self")
            if tx is not None:
                out.append(tx)
        f = f.f_back
    return out


def _frame_text(tx) -> Optional[str]:
    code = tx.code
    inst = tx.current
    pos = getattr(inst, "positions", None) if inst is not None else None
    line = pos.lineno if pos is not None and pos.lineno is not None else None
    if line is None:
        line = getattr(inst, "starts_line", None) or code.co_firstlineno
    text = linecache.getline(code.co_filename, line).strip()
    return f'File "{code.co_filename}", line {line}, in {code.co_name}\n    {text}'


def current_stack_trace() -> Optional[str]:
    """The stack trace for a node created now (None outside a trace)."""
    from ._trace import _export_root
    txs = _translator_frames()
    frames: List[str] = []
    for tx in reversed(txs):
        if tx.code is _export_root.__code__:
            continue
        frames.append(_frame_text(tx))
    if not frames:
        return None
    return "\n  ".join(frames)


def user_lines(trace: str, package_dir: Optional[str] = None) -> List[str]:
    """The ``File ..., line N`` + code pairs of ``trace`` outside ember's own package (the user's
    lines), innermost last; all frames if every frame is ember's."""
    import os
    if package_dir is None:
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lines = [ln.strip() for ln in str(trace).splitlines() if ln.strip()]
    pairs = [(lines[i], lines[i + 1] if i + 1 < len(lines) else "") for i in range(0, len(lines), 2)]
    mine = [p for p in pairs if not _in_dir(p[0], package_dir)]
    return [f"{a} {b}".strip() for a, b in (mine or pairs)]


def _in_dir(frame_line: str, package_dir: str) -> bool:
    import os
    if not frame_line.startswith('File "'):
        return False
    path = frame_line[len('File "'):].split('"', 1)[0]
    return os.path.abspath(path).startswith(package_dir + os.sep)
