"""Resume functions: the rest of a frame after a graph break, as a new code object.

A resume function is the original code with a prefix that rebuilds the value
stack from its arguments (``PUSH_NULL`` where CPython had a NULL) and jumps to
the instruction after the break. Its arguments are the stack values followed
by the frame's live locals, all positional. It is an ordinary function of the
user's file, so when it is called the frame hook captures it like any other
frame (its own cache entries and guards).

Built with the ``bytecode`` package, which recomputes jump offsets, the stack
depth and (3.11+) the exception table on every Python version."""
from __future__ import annotations

import dis

from bytecode import Bytecode, Instr, Label

from .exc import Unsupported

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
_cache: dict = {}


def resume_code(code, target_offset, stack_layout, local_names):
    """Code for resuming ``code`` at ``target_offset``.

    ``stack_layout``: one entry per stack slot, ``None`` for a NULL, else the argument name
    holding it; ``local_names``: the live locals passed after the stack arguments."""
    key = (code, target_offset, tuple(stack_layout), tuple(local_names))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    if code.co_cellvars or code.co_freevars:
        raise Unsupported("graph break in a function with closure cells (resume function not supported)")
    bc = Bytecode.from_code(code)
    instrs = [i for i in bc if isinstance(i, Instr)]
    dis_insts = [i for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]
    if len(instrs) != len(dis_insts) or any(a.name != b.opname for a, b in zip(instrs, dis_insts)):
        raise Unsupported("bytecode of the frame could not be matched for a resume function")
    idx = next((k for k, d in enumerate(dis_insts) if d.offset == target_offset), None)
    if idx is None:
        raise Unsupported("resume target not found")
    target = instrs[idx]
    pos = next(k for k, item in enumerate(bc) if item is target)
    label = Label()
    body = list(bc)
    body.insert(pos, label)
    prefix = [Instr("RESUME", 0)]
    for name in stack_layout:
        prefix.append(Instr("PUSH_NULL") if name is None else Instr("LOAD_FAST", name))
    prefix.append(Instr("JUMP_FORWARD", label))
    args = [n for n in stack_layout if n is not None] + list(local_names)
    new = bc
    new[:] = prefix + body
    new.argnames = args
    new.argcount = len(args)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = bc.flags & ~(_CO_VARARGS | _CO_VARKEYWORDS)
    new.name = f"__resume_at_{target_offset}_{code.co_name}"
    if hasattr(bc, "qualname"):
        new.qualname = new.name
    new.filename = code.co_filename
    new.first_lineno = code.co_firstlineno
    try:
        out = new.to_code()
    except Exception as e:  # noqa: BLE001 - a bytecode we cannot rebuild: run the frame eagerly
        raise Unsupported(f"could not build the resume function: {type(e).__name__}: {e}")
    _cache[key] = out
    return out


def clear_cache():
    _cache.clear()
