"""Resume functions: the rest of a frame after a graph break, as a new code object.

A resume function is the original code with a prefix that rebuilds the value
stack from its arguments (``PUSH_NULL`` where CPython had a NULL) and jumps to
the instruction after the break. Its arguments are the frame's live locals
(in their original order) followed by the stack values, all positional. It is an ordinary function of the
user's file, so when it is called the frame hook captures it like any other
frame (its own cache entries and guards).

* **Always built from the original code.** A break inside a resume function
  maps its offset back to the original code (``_origin``), so a loop that
  breaks in every iteration resumes in *one* code object, whatever the
  iteration: its cache entries (and the recompile limit) are shared, and an
  entry whose guards hold for the next iteration is reused.
* **Closure cells become free variables.** The frame's own cells
  (``co_cellvars``: locals captured by inner functions) and its free
  variables are both passed as the resume function's closure, as cell
  objects, so an inner function created before the break and the resumed
  code keep sharing the same cell. ``MAKE_CELL``/``COPY_FREE_VARS`` of the
  body become ``NOP`` (the prefix copies the free variables), which keeps a
  one-to-one instruction mapping with the original code.
* **Trampolines** (``trampoline_code``) run the breaking call of a break that an
  exception-table entry covers (inside ``try``/``with``): the original code whose
  prefix rebuilds the stack below the call and jumps to an appended block that
  calls a thunk under a copy of the covering entry. If the call returns, the
  trampoline returns ``(TRAMPOLINE_OK, value)`` to the compiled code, which goes
  on with the resume function; if it raises, the frame's own handler runs in
  the trampoline (eagerly, to the end of the function) and whatever the
  trampoline returns or raises is the frame's result.
* **Blocks.** ``with`` and ``try`` blocks need no setup instruction on
  3.11+: they are exception-table entries, which the ``bytecode`` package
  rebuilds (with their stack depths) from the original code, so the resumed
  code still has its handlers as long as the prefix rebuilds the stack the
  table expects -- the ``__exit__`` callable of each open ``with`` is one of
  the stack values (see ``variables/ctx.py`` for the grad-mode ones).

Built with the ``bytecode`` package, which recomputes jump offsets, the stack
depth and the exception table on every Python version."""
from __future__ import annotations

import dis

import sys


from .exc import Unsupported

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
# PY313 superinstructions -> the two instructions each stands for (split in resume functions)
_SUPERINSTRUCTIONS = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
                      "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
                      "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST")}
_cache: dict = {}
# resume code -> (original code, {offset in the resume code: offset in the original})
_origin: dict = {}


def _real_instructions(code):
    return [i for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]


def is_resume(code) -> bool:
    return code in _origin


def original(code, offset):
    """(original code, offset there) for an instruction of ``code`` (itself if not a resume function)."""
    hit = _origin.get(code)
    if hit is None:
        return code, offset
    orig, offsets = hit
    if offset not in offsets:
        raise Unsupported("resume target inside a resume function's prefix")
    return orig, offsets[offset]


def _past_extended_args(code, offset):
    """The offset of the instruction that an ``EXTENDED_ARG`` at ``offset`` extends (``offset``
    itself otherwise). The instruction after a breaking call can be the prefix of a long jump
    (an ``if`` whose body spans more than 255 code units); ``bytecode`` folds such prefixes into
    the instruction they extend, so the resume function jumps there (before, the target was "not
    found" and the frame ran eagerly)."""
    insts = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    for k, i in enumerate(insts):
        if i.offset == offset:
            while insts[k].opname == "EXTENDED_ARG" and k + 1 < len(insts):
                k += 1
            return insts[k].offset
    return offset


def _real_offsets(code):
    """Offset of each ``EXTENDED_ARG`` prefix -> that of the instruction it extends."""
    out, prefix = {}, []
    for i in dis.get_instructions(code):
        if i.opname == "CACHE":
            continue
        if i.opname == "EXTENDED_ARG":
            prefix.append(i.offset)
            continue
        for o in prefix:
            out[o] = i.offset
        prefix = []
    return out


def _rebuild(code, target_offset, stack_layout, local_names, name, append=None, extra=()):
    """The original code as a function of (stack values, locals): a prefix pushes the stack
    and jumps to ``target_offset`` (or, with ``append(covering TryBegin or None)`` -> instructions,
    to that block appended after the body). Cells become free variables."""
    # (imported here: ``bytecode`` costs ~10 ms, which a compile without graph breaks, a warm
    # one included, need not pay; ``is_resume`` runs on every compile)
    from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd
    bc = Bytecode.from_code(code)
    instrs = [i for i in bc if isinstance(i, Instr)]
    dis_insts = _real_instructions(code)
    if len(instrs) != len(dis_insts) or any(a.name != b.opname for a, b in zip(instrs, dis_insts)):
        raise Unsupported("bytecode of the frame could not be matched for a resume function")
    target_offset = _past_extended_args(code, target_offset)
    idx = next((k for k, d in enumerate(dis_insts) if d.offset == target_offset), None)
    if idx is None:
        raise Unsupported("resume target not found")
    target = instrs[idx]
    # exception-table depths as in the original (the bytecode package would recompute them
    # along the prefix's path, which enters the body in the middle of a try region)
    try:
        # (keyed by the instruction an entry starts at: a try region starting with an
        # EXTENDED_ARG prefix -- a long jump, a big constant index -- starts at the prefix, which
        # ``bytecode`` folds into the instruction it extends: such a frame was "not understood"
        # and ran eagerly, found by the fuzzer on 3.13)
        real = _real_offsets(code)
        depths = {real.get(e.start, e.start): e.depth for e in dis._parse_exception_table(code)}
    except Exception as e:  # noqa: BLE001
        raise Unsupported(f"exception table of the frame not readable: {e}")
    offset_of = {id(i): d.offset for i, d in zip(instrs, dis_insts)}
    pending = []
    for item in bc:
        if isinstance(item, TryBegin):
            pending.append(item)
        elif isinstance(item, Instr) and pending:
            for tb in pending:
                d = depths.get(offset_of[id(item)])
                if d is None:
                    raise Unsupported("exception table of the frame not understood")
                tb.stack_depth = d
            pending = []
    cells = list(bc.cellvars)
    free = cells + [n for n in bc.freevars if n not in cells]
    cellset = set(cells)
    label = Label()
    body = []
    cover, covering = None, None
    for item in bc:
        if isinstance(item, TryBegin):
            cover = item
        elif isinstance(item, TryEnd):
            cover = None
        if item is target:
            covering = cover
            if append is None:
                body.append(label)
        if isinstance(item, Instr):
            if item.name in ("MAKE_CELL", "COPY_FREE_VARS"):
                item = Instr("NOP", location=item.location)
            elif isinstance(item.arg, CellVar):
                item = Instr(item.name, FreeVar(item.arg.name), location=item.location)
            elif item.name in ("LOAD_FAST", "LOAD_CLOSURE") and isinstance(item.arg, str) and item.arg in cellset:
                # PY313: an argument that is also a cell is loaded as a cell by LOAD_FAST
                item = Instr(item.name, FreeVar(item.arg), location=item.location)
            elif item.name in _SUPERINSTRUCTIONS:
                # PY313: the pair packs two local indices in 4 bits each, and the resume function
                # renumbers its locals (the stack arguments come after them): past 15 the
                # ``bytecode`` package packed them silently wrong -- ``return (t7, i8)`` read
                # (i8, a). Split into its two plain instructions (``resume_code`` maps both back).
                first, second = _SUPERINSTRUCTIONS[item.name]
                a, b = item.arg
                body.append(Instr(first, FreeVar(a) if first == "LOAD_FAST" and a in cellset else a,
                                  location=item.location))
                item = Instr(second, FreeVar(b) if second == "LOAD_FAST" and b in cellset else b,
                             location=item.location)
        body.append(item)
    if append is not None:
        body.append(label)
        body.extend(append(covering, target))
    prefix = []
    if free:
        prefix.append(Instr("COPY_FREE_VARS", len(free)))
    prefix.append(Instr("RESUME", 0))
    for n in stack_layout:
        prefix.append(Instr("PUSH_NULL") if n is None else Instr("LOAD_FAST", n))
    prefix.append(Instr("JUMP_FORWARD", label))
    # locals first, in the original order: the frame's first argument stays first (zero-argument
    # super() reads it from there)
    args = list(local_names) + [n for n in stack_layout if n is not None] + list(extra)
    if cellset & set(args) or set(bc.freevars) & set(args):
        raise Unsupported("a closure cell passed as a plain argument of a resume function")
    new = bc
    new[:] = prefix + body
    new.argnames = args
    new.argcount = len(args)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.cellvars = []
    new.freevars = free
    new.flags = bc.flags & ~(_CO_VARARGS | _CO_VARKEYWORDS)
    new.name = name
    if hasattr(bc, "qualname"):
        new.qualname = new.name
    new.filename = code.co_filename
    new.first_lineno = code.co_firstlineno
    try:
        # keep the exception-table depths of the original code: the prefix enters the body with
        # the stack the table expects, but a recomputation would follow the prefix's path
        return new.to_code(compute_exception_stack_depths=False), dis_insts
    except Exception as e:  # noqa: BLE001 - a bytecode we cannot rebuild: run the frame eagerly
        raise Unsupported(f"could not build the resume function: {type(e).__name__}: {e}")


class _TrampolineOk:
    """Marks the value a trampoline returns when the breaking call returned normally."""

    def __repr__(self):
        return "TRAMPOLINE_OK"


TRAMPOLINE_OK = _TrampolineOk()


def trampoline_code(code, call_offset, stack_layout, local_names):
    """Code running a thunk (the breaking call, as ``__thunk``, the last argument) at ``call_offset`` of ``code`` under the exception-table entry
    covering that instruction; see the module docstring."""
    code, call_offset = original(code, call_offset)
    key = ("trampoline", code, call_offset, tuple(stack_layout), tuple(local_names))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    from bytecode import Instr, TryBegin, TryEnd

    def call_block(covering, target):
        if covering is None:
            raise Unsupported("trampoline: no exception-table entry covers the call")
        loc = target.location
        entry = TryBegin(covering.target, covering.push_lasti, covering.stack_depth)
        if sys.version_info >= (3, 13):
            call = [Instr("LOAD_FAST", "__thunk", location=loc), Instr("PUSH_NULL", location=loc)]
        else:
            call = [Instr("PUSH_NULL", location=loc), Instr("LOAD_FAST", "__thunk", location=loc)]
        if sys.version_info < (3, 12):
            call.append(Instr("PRECALL", 0, location=loc))
        call.append(Instr("CALL", 0, location=loc))
        out = [entry] + call + [TryEnd(entry), Instr("STORE_FAST", "__v", location=loc)]
        # drop the stack below the call (NULL-safe: STORE_FAST, never POP_TOP)
        out += [Instr("STORE_FAST", "__dead", location=loc) for _ in stack_layout]
        out += [Instr("LOAD_CONST", TRAMPOLINE_OK, location=loc), Instr("LOAD_FAST", "__v", location=loc),
                Instr("BUILD_TUPLE", 2, location=loc), Instr("RETURN_VALUE", location=loc)]
        return out

    layout = list(stack_layout)
    out, _ = _rebuild(code, call_offset, layout, list(local_names),
                      f"__trampoline_at_{call_offset}_{code.co_name}", append=call_block, extra=["__thunk"])
    _cache[key] = out
    return out


def resume_code(code, target_offset, stack_layout, local_names):
    """Code for resuming ``code`` at ``target_offset``.

    ``stack_layout``: one entry per stack slot, ``None`` for a NULL, else the argument name
    holding it; ``local_names``: the live locals, passed before the stack arguments. The
    result's ``co_freevars`` are the original cell and free variables: call it through a
    function whose closure holds their cells in that order."""
    code, target_offset = original(code, target_offset)
    key = (code, target_offset, tuple(stack_layout), tuple(local_names))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    out, dis_insts = _rebuild(code, target_offset, stack_layout, local_names,
                              f"__resume_at_{target_offset}_{code.co_name}")
    new_insts = _real_instructions(out)
    # the original's instructions as the body has them: a superinstruction is two, both
    # mapping back to its offset
    expect = [(name, d) for d in dis_insts for name in _SUPERINSTRUCTIONS.get(d.opname, (d.opname,))]
    n_prefix = len(new_insts) - len(expect)
    if n_prefix < 0 or any(a.opname != name for a, (name, b) in zip(new_insts[n_prefix:], expect)
                           if b.opname not in ("MAKE_CELL", "COPY_FREE_VARS", "LOAD_CLOSURE")):
        raise Unsupported("resume function's bytecode does not map back to the original")
    _origin[out] = (code, {a.offset: b.offset for a, (_, b) in zip(new_insts[n_prefix:], expect)})
    _cache[key] = out
    return out


def clear_cache():
    _cache.clear()   # _origin stays: a resume function still running must map back
