"""The symbolic bytecode interpreter: runs a frame's bytecode over variable trackers.

One handler per opcode, written against ``dis.get_instructions`` (which
decodes arguments identically on 3.11, 3.12 and 3.13); the places where the
three versions differ are marked ``PY311`` / ``PY312`` / ``PY313``:

* NULL placement around calls: 3.11/3.12 push NULL *below* the callable,
  3.13 *above* it (``LOAD_GLOBAL``/``LOAD_ATTR`` low bit, ``PUSH_NULL``);
* keyword names: ``KW_NAMES`` + ``CALL`` (3.11/3.12) vs ``CALL_KW`` (3.13);
* comprehensions: nested functions (3.11) vs inlined with
  ``LOAD_FAST_AND_CLEAR`` (3.12+); ``END_FOR`` after loops (3.12+, plus
  ``POP_TOP`` in 3.13); superinstructions ``LOAD_FAST_LOAD_FAST`` etc. (3.13);
* f-strings: ``FORMAT_VALUE`` (3.11/3.12) vs ``CONVERT_VALUE`` +
  ``FORMAT_SIMPLE``/``FORMAT_WITH_SPEC`` (3.13); ``MAKE_FUNCTION`` flags vs
  ``SET_FUNCTION_ATTRIBUTE`` (3.13); ``CALL_INTRINSIC_1`` (3.12+).

Control flow on Python values is followed (loops unroll); on tensor data it is
unsupported. Code in ``try`` blocks is traced as if nothing raises: a break
there runs its call in a trampoline under the frame's handler
(``resume.trampoline_code``), and if the graph itself raises at run time the
compiled code re-runs the frame eagerly (``OutputGraph.compile``)."""
from __future__ import annotations

import collections
import dis
import functools
import inspect
import itertools
import operator
import sys
import types
import weakref

from . import config
from .exc import ObservedException, Unsupported
from .source import BuiltinSource, ClosureSource, FuncSource, GlobalSource, LocalSource
from .variables import (BuiltinVariable, CellVariable, ConstantVariable, DictVariable, IteratorVariable,
                        ListVariable, NestedFunctionVariable, NullVariable, TensorVariable, TupleVariable,
                        UndefinedVariable, binary_op, bind_args, unary_op, wrap)
from .variables.base import VariableTracker
from .variables.constant import _specialised
from .variables.lists import BaseListVariable
from .variables.objects import NNModuleVariable
from .variables.environ import EnvironVariable
from .variables.sets import SetVariable

PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)

_BINARY = {"+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
           "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_, "**": operator.pow,
           ">>": operator.rshift, "-": operator.sub, "/": operator.truediv, "^": operator.xor,
           "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
           "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior,
           "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub, "/=": operator.itruediv,
           "^=": operator.ixor}
_NB_OPS = [sym for _, sym in dis._nb_ops]
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
            ">=": operator.ge}

_NULL = NullVariable()

# Top-level instructions at which a graph break can be made (see make_break).
BREAKABLE = {"CALL", "CALL_KW", "BINARY_SUBSCR", "STORE_SUBSCR", "TO_BOOL", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE",
             "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE",
             "POP_JUMP_BACKWARD_IF_FALSE"}


class GraphBreak:
    """What the root translator hands back when it stops at a break instruction."""

    def __init__(self, kind, inst, stack, call, cond, targets, local_vars, reason):
        self.kind = kind            # "call" | "store" (a call whose result is dropped) | "bool" | "jump"
        self.inst = inst
        self.stack = stack          # trackers below the break's operands (NullVariable for NULL)
        self.call = call            # (fn, args, kwargs) for "call"
        self.cond = cond            # tracker tested for "bool"/"jump"
        self.targets = targets      # resume offsets: [next] or [if_true, if_false]
        self.locals = local_vars    # {name: tracker} live locals
        self.reason = reason
        self.covered = False        # a call under an exception-table entry: run in a trampoline


def _user_handler_offsets(code, instructions, index):
    """Offsets covered by a user try/except/with handler (3.12+ inlined-comprehension cleanup excluded)."""
    covered = set()
    try:
        entries = dis._parse_exception_table(code)
    except Exception:
        return covered
    for e in entries:
        i = index.get(e.target)
        if i is not None and i + 1 < len(instructions) and instructions[i].opname == "PUSH_EXC_INFO" \
                and instructions[i + 1].opname == "WITH_EXCEPT_START":
            continue   # a with-block: BEFORE_WITH itself decides whether the context manager is supported
        if i is not None and instructions[i].opname == "CALL_INTRINSIC_1" and \
                "STOPITERATION" in instructions[i].argrepr:
            continue   # a generator's StopIteration -> RuntimeError conversion
        harmless = True
        while i is not None and i < len(instructions):
            op = instructions[i].opname
            if op == "RERAISE":
                break
            if op not in ("SWAP", "POP_TOP", "STORE_FAST", "NOP", "CACHE", "END_FOR"):
                harmless = False
                break
            i += 1
        if not harmless:
            covered.update(range(e.start, e.end))
    return covered


def _covered_offsets(code):
    """Offsets covered by any exception-table entry (try, with, comprehension cleanup)."""
    covered = set()
    try:
        entries = dis._parse_exception_table(code)
    except Exception:
        return None   # unknown: breaks are treated as covered
    for e in entries:
        covered.update(range(e.start, e.end))
    return covered


# code object -> its decoded instructions and the tables derived from them (read-only, shared
# by every translator of that code). An inlined function is translated once per call site and
# loop iteration -- an LSTM cell unrolled over 32 steps decoded its forward and its submodules'
# 66 times a compile with dis, ~60 ms of a 0.25 s warm compile. Weak keys: the entry goes with
# the code object (code objects equal by value have the same bytecode and tables).
_CODE_ANALYSIS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _code_analysis(code):
    """(instructions tuple, offset -> index, try-handler offsets, covered offsets, exception table)."""
    got = _CODE_ANALYSIS.get(code)
    if got is None:
        instructions = tuple(dis.get_instructions(code))
        index = {inst.offset: i for i, inst in enumerate(instructions)}
        got = (instructions, index, frozenset(_user_handler_offsets(code, instructions, index)),
               _frozen(_covered_offsets(code)), _tuple(_exception_table(code)))
        _CODE_ANALYSIS[code] = got
    return got


@functools.lru_cache(maxsize=512)
def _suspending_offsets(code):
    """Offsets inside a try or with block of ``code`` (a generator's implicit StopIteration ->
    RuntimeError handler of 3.12+ excluded): a yield there leaves a cleanup pending."""
    out = set()
    try:
        entries = dis._parse_exception_table(code)
    except Exception:
        return frozenset(range(0, 2 * len(code.co_code)))    # (unknown: every offset)
    targets = {i.offset: i for i in dis.get_instructions(code)}
    for e in entries:
        t = targets.get(e.target)
        if t is not None and t.opname == "CALL_INTRINSIC_1" and "STOPITERATION" in t.argrepr:
            continue
        out.update(range(e.start, e.end))
    return frozenset(out)


def _is_enum_class(v):
    import enum
    from .variables.objects import ClassVariable
    return isinstance(v, ClassVariable) and isinstance(v.cls, enum.EnumMeta)


def _frozen(offsets):
    return None if offsets is None else frozenset(offsets)


def _tuple(entries):
    return None if entries is None else tuple(entries)


class InstructionTranslator:
    def __init__(self, output, code, f_globals, globals_source, local_vars, closure, depth=0, root=None,
                 break_at=None, break_reason=None):
        self.output = output
        self.break_at = break_at
        self.break_reason = break_reason
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.locals = dict(local_vars)
        self.closure = closure
        self.depth = depth
        self.root = root or self
        self.stack = []
        (self.instructions, self.index, self.try_offsets, self.covered_offsets,
         self.exc_table) = _code_analysis(code)
        # exceptions raised while tracing (variables/exceptions.py): the one being handled
        # (``sys.exc_info()``, kept on the root: it spans inlined calls), and on the root the
        # instruction indexes where the exceptions its own open handlers handle surfaced in it
        self.cur_exc = None
        self.handling = []
        self.entered_from = None
        self.ip = 0
        self.kw_names = None
        self.done = False
        self.result = None
        self.current = None
        self.parent = None
        self.pause_at_yield = False     # step the generator (a @contextmanager's), see variables/user_ctx.py
        self.lazy_generator = False     # stepped by a consumer's next() (variables/lists.GeneratorVariable)
        self.paused = False
        self.yielded = [] if code.co_flags & 0x20 else None
        if code.co_flags & 0x80 or code.co_flags & 0x200 or code.co_flags & 0x100:
            raise Unsupported(f"coroutine {code.co_name}")

    # ------------------------------------------------------------------ driver
    def where(self):
        inst = self.current
        line = None
        if inst is not None:
            pos = getattr(inst, "positions", None)
            line = pos.lineno if pos is not None and pos.lineno is not None else None
        return f"{self.code.co_filename}:{line or self.code.co_firstlineno} in {self.code.co_name}"

    def run(self):
        out = self.output
        while not self.done:
            if self.ip >= len(self.instructions):
                raise Unsupported("fell off the end of the bytecode")
            inst = self.instructions[self.ip]
            self.current = inst
            if self.ip == self.break_at and self.depth == 0:
                return self.make_break(inst)
            self.ip += 1
            out.n_instructions += 1
            if out.n_instructions > config.instruction_limit:
                raise Unsupported(f"more than {config.instruction_limit} instructions (huge unrolled loop)")
            # an instruction in a user try block is traced like any code (no exception happens
            # while tracing); if it records graph ops, the compiled code re-runs the frame eagerly
            # when the graph raises, so the handler sees the exception (OutputGraph.compile). A try
            # block whose traced code records no op (an LR scheduler's try/finally around Python
            # arithmetic) cannot see a graph exception: it does not count.
            ops_before = out.n_calls if inst.offset in self.try_offsets else None
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise Unsupported(f"bytecode {inst.opname} is not supported")
            try:
                handler(inst)
                if ops_before is not None and out.n_calls != ops_before:
                    out.covers_try = True
                if self.paused:           # a generator stepped by a with-block stops at its yield
                    return self.result
            except ObservedException as e:
                if ops_before is not None and out.n_calls != ops_before:
                    out.covers_try = True
                if self.depth == 0 and e.exc.surfaced is None:
                    e.exc.surfaced = self.ip - 1
                if self.unwind(e, inst):
                    continue
                if e.where is None:
                    e.where = self.where()
                if self.depth == 0:
                    self._root_break_index(e, inst)
                raise
            except Unsupported as e:
                if e.where is None:
                    e.where = self.where()
                if self.depth == 0:
                    self._root_break_index(e, inst)
                raise
            except RecursionError:
                raise Unsupported("recursion too deep while tracing")
        return self.result

    def _root_break_index(self, e, inst):
        """Where the root frame breaks for ``e``: at the failing instruction if a break can be
        made there, but inside a handler entered for an exception raised while tracing (or for
        an exception no frame handles) at the instruction where that exception first reached
        the root frame (its call then runs eagerly, under the frame's handler: the handler
        state -- ``sys.exc_info()``, a bare ``raise`` -- is not rebuilt in a resume function)."""
        if e.no_break:
            return
        origin = self.handling[0] if self.handling else None
        if origin is None and isinstance(e, ObservedException):
            origin = e.exc.surfaced
        if origin is not None:
            e.break_index = origin if self.instructions[origin].opname in BREAKABLE else None
        elif e.break_index is None and inst.opname in BREAKABLE:
            e.break_index = self.ip - 1
        elif e.break_index is None and self.output.item_origins:
            # a captured .item() value (config.capture_scalar_outputs) needed where no break can
            # be made (an f-string, a subscript): break at that .item() call, which then runs eagerly
            e.break_index = getattr(e, "item_origin", None)
            if e.break_index is None:
                e.break_index = self.output.item_origins[-1]

    def unwind(self, e, inst):
        """Jump to the handler of this frame's exception table covering ``inst`` for the observed
        exception ``e``, as CPython does: pop the stack to the entry's depth, push the offset
        of the instruction if the entry says so, push the exception. False if none covers it."""
        entry = _handler_for(self.exc_table, inst.offset)
        if entry is None:
            return False
        target_i = self.index.get(entry.target)
        if target_i is None or len(self.stack) < entry.depth:
            raise Unsupported("exception table of the frame not understood")
        del self.stack[entry.depth:]
        self.kw_names = None
        if entry.lasti:
            self.push(ConstantVariable(inst.offset))
        self.push(e.exc)
        self.ip = target_i
        self.entered_from = e.exc.surfaced if self.depth == 0 else None
        return True

    def push(self, v):
        self.stack.append(v)

    def pop(self):
        if not self.stack:
            raise Unsupported("stack underflow (bytecode not understood)")
        v = self.stack.pop()
        return v.realize() if isinstance(v, LazyArgVariable) else v

    def popn(self, n):
        if n == 0:
            return []
        if len(self.stack) < n:
            raise Unsupported("stack underflow (bytecode not understood)")
        items = [v.realize() if isinstance(v, LazyArgVariable) else v for v in self.stack[-n:]]
        del self.stack[-n:]
        return items

    def peek(self, n=1):
        """The n-th value from the top, wrapped if it is a resume function's unread argument."""
        if len(self.stack) < n:
            raise Unsupported("stack underflow (bytecode not understood)")
        v = self.stack[-n]
        if isinstance(v, LazyArgVariable):
            v = self.stack[-n] = v.realize()
        return v

    def jump(self, inst):
        self.ip = self.index[inst.argval]

    # ------------------------------------------------------------------ inlining
    def callee(self, fn, args, kwargs):
        """A translator for a call of user function ``fn``, ready to run (see inline_call)."""
        if self.depth + 1 > config.inline_depth_limit:
            raise Unsupported(f"inlining deeper than {config.inline_depth_limit} calls")
        code = fn.get_code()
        defaults, kwdefaults = fn.get_defaults(self)
        bound = bind_args(code, args, kwargs, defaults, kwdefaults)
        f_globals = fn.get_globals()
        root = self.root
        gsrc = None if f_globals is root.f_globals else _ObjSource(self.output.obj_ref(f_globals))
        sub = InstructionTranslator(self.output, code, f_globals, gsrc, bound, fn.get_closure(self),
                                    depth=self.depth + 1, root=root)
        sub.parent = self            # the caller, for stacklevel (warnings.warn, logging)
        return sub

    def inline_call(self, fn, args, kwargs):
        sub = self.callee(fn, args, kwargs)
        if sub.yielded is not None:
            # calling a generator function runs none of its body: each next() runs it to its next
            # yield (variables/lists.GeneratorVariable). (It used to run to its end here, which
            # computed every item before the consumer's loop body ran: a body writing in place
            # what the generator read next gave other values than eager.)
            from .variables.lists import GeneratorVariable
            return GeneratorVariable(sub)
        return sub.run()

    # ------------------------------------------------------------------ helpers
    def load_global(self, name):
        written = self.output.attr_overlay.get((id(self.f_globals), name))
        if written is not None:
            from .variables.deletions import is_deleted, read_deleted_global
            return read_deleted_global(self, name) if is_deleted(written) else written
        if name in self.f_globals:
            src = GlobalSource(name) if self.globals_source is None else _GlobalIn(self.globals_source, name)
            return wrap(self, self.f_globals[name], src)
        b = self.f_globals.get("__builtins__", __builtins__)
        bd = b if isinstance(b, dict) else b.__dict__
        if name in bd:
            gexpr = "G" if self.globals_source is None else self.globals_source.expr()
            self.output.guards.add(f"{name!r} not in {gexpr}", f"global {name} is not defined (builtin used)")
            return wrap(self, bd[name], BuiltinSource(name))
        raise Unsupported(f"NameError: name {name!r} is not defined")

    def getitem(self, obj, key):
        from .variables.dict_objects import DictObjectVariable
        if isinstance(obj, DictObjectVariable):
            return obj.getitem(self, key)
        if isinstance(obj, TensorVariable):
            _check_index(key)
            return self.output.call_function(operator.getitem, [obj, key], {})
        if isinstance(obj, BaseListVariable):
            return obj.getitem(self, key)
        if isinstance(obj, (DictVariable, EnvironVariable)):
            return obj.call_method(self, "__getitem__", [key], {})
        from .variables.objects import ModuleSliceVariable
        if isinstance(obj, (NNModuleVariable, ModuleSliceVariable)):
            return obj.getitem(self, key)
        if obj.is_python_constant() and key.is_python_constant():
            try:
                return ConstantVariable(obj.as_python_constant()[key.as_python_constant()])
            except Exception as e:
                from .variables.exceptions import raise_from_real
                raise_from_real(self, e, f"indexing raised {type(e).__name__}: {e}")
        raise Unsupported(f"indexing {obj}")

    def setitem(self, obj, key, value):
        if isinstance(obj, TensorVariable):
            if _is_masked_fill(obj, key, value):
                # ``x[mask] = v`` (a boolean mask over x's leading dims, a scalar v): the same
                # write as ``x.masked_fill_(mask[..., None...], v)``, whose shapes do not depend on
                # the mask's data (``labels[labels == pad] = -100``; it broke the graph)
                extra = obj.example.dim() - key.example.dim()
                if extra:
                    key = self.output.call_function(
                        operator.getitem, [key, ConstantVariable((Ellipsis,) + (None,) * extra)], {})
                obj.call_method(self, "masked_fill_", [key, value], {})
                return
            _check_index(key)
            self.output.call_function(operator.setitem, [obj, key, value], {}, returns_none=True)
            return
        from .variables.deques import DequeVariable
        if isinstance(obj, (ListVariable, DictVariable, DequeVariable)):
            obj.call_method(self, "__setitem__", [key, value], {})
            return
        from .variables.dict_objects import DictObjectVariable
        if isinstance(obj, DictObjectVariable):
            obj.setitem(self, key, value)
            return
        raise Unsupported(f"item assignment on {obj}")

    def call(self, fn, args, kwargs):
        return fn.call_function(self, list(args), dict(kwargs))

    # ------------------------------------------------------------------ graph breaks
    def make_break(self, inst):
        """Stop before ``inst`` (which could not be traced) and describe the break."""
        def nobreak(msg):
            e = Unsupported(f"{self.break_reason}; and no graph break is possible there: {msg}")
            e.where = self.where()
            e.no_break = True
            return e

        nxt = self.instructions[self.ip + 1].offset if self.ip + 1 < len(self.instructions) else None
        live = {k: v for k, v in self.locals.items() if not isinstance(v, UndefinedVariable)}
        op = inst.opname
        stack = list(self.stack)
        if op in ("CALL", "CALL_KW"):
            n = inst.arg
            kw = self.kw_names
            if op == "CALL_KW":
                kw = stack.pop().as_python_constant()
            if len(stack) < n + 2:
                raise nobreak("stack underflow")
            args = stack[len(stack) - n:]
            upper, deeper = stack[-n - 1], stack[-n - 2]
            rest = stack[:len(stack) - n - 2]
            fn, self_ = self._callable_and_self(deeper, upper)
            if self_ is not None:
                args = [self_] + args
            kwargs = {}
            if kw:
                kwargs = dict(zip(kw, args[len(args) - len(kw):]))
                args = args[:len(args) - len(kw)]
            brk = GraphBreak("call", inst, rest, (fn, args, kwargs), None, [nxt], live, self.break_reason)
            brk.covered = self.covered_offsets is None or inst.offset in self.covered_offsets
            return brk
        if op == "BINARY_SUBSCR":
            # ``obj[key]`` that could not be traced (a boolean mask, a container dynamo does not
            # model): made by ``operator.getitem`` after the graph, as a call
            if len(stack) < 2:
                raise nobreak("stack underflow")
            getitem = BuiltinVariable(operator.getitem)
            brk = GraphBreak("call", inst, stack[:-2], (getitem, stack[-2:], {}), None, [nxt], live,
                             self.break_reason)
            brk.covered = self.covered_offsets is None or inst.offset in self.covered_offsets
            return brk
        if op == "STORE_SUBSCR":
            # ``obj[key] = value`` that could not be traced (``out[mask] = y``, a boolean mask and
            # a tensor of rows): made by ``operator.setitem`` after the graph
            if len(stack) < 3:
                raise nobreak("stack underflow")
            if self.covered_offsets is None or inst.offset in self.covered_offsets:
                # (a handler could catch what it raises: that takes a trampoline, made for calls)
                raise nobreak("an item assignment inside a try/with block")
            value, obj, key = stack[-3:]
            setitem = BuiltinVariable(operator.setitem)
            return GraphBreak("store", inst, stack[:-3], (setitem, [obj, key, value], {}), None, [nxt], live,
                              self.break_reason)
        if op == "TO_BOOL":
            return GraphBreak("bool", inst, stack[:-1], None, stack[-1], [nxt], live, self.break_reason)
        if "POP_JUMP" in op:
            jump_if = "TRUE" in op
            targets = [inst.argval, nxt] if jump_if else [nxt, inst.argval]
            return GraphBreak("jump", inst, stack[:-1], None, stack[-1], targets, live, self.break_reason)
        raise nobreak(f"instruction {op}")

    # ------------------------------------------------------------------ no-ops
    def NOP(self, inst):
        pass

    RESUME = CACHE = PRECALL = EXTENDED_ARG = NOP

    def MAKE_CELL(self, inst):
        name = inst.argval
        cur = self.locals.get(name)
        if isinstance(cur, LazyArgVariable):
            cur = cur.realize()
        self.locals[name] = CellVariable(cur)

    def COPY_FREE_VARS(self, inst):
        freevars = self.code.co_freevars
        if self.depth == 0:
            for i, name in enumerate(freevars):
                self.locals[name] = self.closure[i]
        else:
            for name, cell in zip(freevars, self.closure):
                self.locals[name] = cell

    # ------------------------------------------------------------------ stack
    def POP_TOP(self, inst):
        if not self.stack:
            raise Unsupported("stack underflow (bytecode not understood)")
        self.stack.pop()   # a discarded value (e.g. a call's result given to a resume function): no guard

    def PUSH_NULL(self, inst):
        self.push(_NULL)

    def COPY(self, inst):
        self.push(self.peek(inst.arg))

    def SWAP(self, inst):
        s = self.stack
        s[-1], s[-inst.arg] = s[-inst.arg], s[-1]

    def END_FOR(self, inst):
        self.popn(1 if PY313 else 2)

    def LOAD_CONST(self, inst):
        self.push(ConstantVariable(inst.argval))

    def RETURN_VALUE(self, inst):
        self.result = self.pop()
        self.done = True

    def RETURN_CONST(self, inst):
        self.result = ConstantVariable(inst.argval)
        self.done = True

    # ------------------------------------------------------------------ locals
    def _load(self, name):
        v = self.locals.get(name)
        if isinstance(v, LazyArgVariable):
            v = self.locals[name] = v.realize()
        if v is None or isinstance(v, UndefinedVariable):
            raise Unsupported(f"UnboundLocalError: local variable {name!r} (the program raises)")
        return v

    def LOAD_FAST(self, inst):
        v = self.locals.get(inst.argval)
        if isinstance(v, LazyArgVariable) and inst.argval.startswith("__stack"):
            self.push(v)   # a resume prefix rebuilding the stack: wrapped when used, not if discarded
            return
        self.push(self._load(inst.argval))

    LOAD_FAST_CHECK = LOAD_FAST
    LOAD_CLOSURE = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        v = self.locals.get(inst.argval)
        if isinstance(v, LazyArgVariable):
            v = v.realize()
        self.push(v or UndefinedVariable())
        self.locals[inst.argval] = UndefinedVariable()

    def LOAD_FAST_LOAD_FAST(self, inst):
        a, b = inst.argval
        self.push(self._load(a))
        self.push(self._load(b))

    def STORE_FAST(self, inst):
        if self.stack and isinstance(self.stack[-1], LazyArgVariable):
            self.locals[inst.argval] = self.stack.pop()   # stays unwrapped until read
            return
        self.locals[inst.argval] = self.pop()

    def STORE_FAST_LOAD_FAST(self, inst):
        a, b = inst.argval
        self.locals[a] = self.pop()
        self.push(self._load(b))

    def STORE_FAST_STORE_FAST(self, inst):
        a, b = inst.argval
        self.locals[a] = self.pop()
        self.locals[b] = self.pop()

    def DELETE_FAST(self, inst):
        self._load(inst.argval)
        self.locals[inst.argval] = UndefinedVariable()

    def LOAD_DEREF(self, inst):
        from .variables.deletions import load_cell
        self.push(load_cell(self, inst.argval))

    def DELETE_DEREF(self, inst):
        from .variables.deletions import delete_deref
        delete_deref(self, inst.argval)

    def STORE_DEREF(self, inst):
        cell = self.locals.get(inst.argval)
        if not isinstance(cell, CellVariable):
            raise Unsupported("STORE_DEREF without a cell")
        cell.set(self.pop(), self)

    def LOAD_GLOBAL(self, inst):
        v = self.load_global(inst.argval)
        if inst.arg & 1:
            if PY313:
                self.push(v)
                self.push(_NULL)
            else:
                self.push(_NULL)
                self.push(v)
        else:
            self.push(v)

    def LOAD_NAME(self, inst):
        raise Unsupported("LOAD_NAME (module/class-level code)")

    # ------------------------------------------------------------------ attributes
    def _getattr(self, obj, name):
        from .variables.builtin import _container_lacks
        if _container_lacks(obj, name):
            # (container trackers answer any name with a method tracker)
            from .variables.exceptions import raise_observed
            raise_observed(self, AttributeError, f"{obj.python_type().__name__!r} object has no attribute {name!r}")
        return obj.var_getattr(self, name)

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        if PY312 and inst.arg & 1:
            attr = self._getattr(obj, inst.argval)
            if PY313:
                self.push(attr)
                self.push(_NULL)
            else:
                self.push(_NULL)
                self.push(attr)
        else:
            self.push(self._getattr(obj, inst.argval))

    def LOAD_METHOD(self, inst):  # PY311
        obj = self.pop()
        self.push(_NULL)
        self.push(self._getattr(obj, inst.argval))

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        self.store_attr(obj, inst.argval, value)

    def store_attr(self, obj, name, value):
        """``obj.name = value`` (``STORE_ATTR``, ``setattr()``): on an object made in the frame a
        tracker update; on an outside object recorded and replayed after the graph."""
        from .variables.objects import NewObjectVariable, UserObjectVariable
        if isinstance(obj, (NewObjectVariable, UserObjectVariable)) and self._store_through_property(obj, name, value):
            return
        if isinstance(obj, NewObjectVariable):
            if hasattr(obj, "store_attr"):
                obj.store_attr(self, name, value)     # (a user __setattr__ is inlined)
            else:
                obj.set_attr(name, value)       # an object made in the frame: no side effect to replay
            return
        from .variables.exceptions import ExceptionVariable
        if isinstance(obj, ExceptionVariable) and obj.source is None:
            obj.set_attr(self, name, value)
            return
        if isinstance(obj, NNModuleVariable):
            target = obj.module
        elif isinstance(obj, TensorVariable) and name == "grad" and obj.source is not None \
                and (isinstance(value, TensorVariable) or (isinstance(value, ConstantVariable)
                                                           and value.value is None)):
            # p.grad = None (an optimizer's zero_grad) on a graph input: replayed after the graph
            # (the setter checks a tensor's shape, dtype and device there); later reads of p.grad
            # in the frame see the value written
            target = self.output.input_value(obj.source)
            if target is None:
                raise Unsupported("Tensor.grad assignment on a tensor that is not a graph input")
        elif isinstance(obj, UserObjectVariable):
            target = obj.obj
            import inspect as _inspect
            cls = type(target)
            if cls.__setattr__ is not object.__setattr__ or getattr(cls, "__slots__", None) is not None:
                raise Unsupported(f"attribute assignment on {cls.__name__} (custom __setattr__/slots)")
            try:
                attr = _inspect.getattr_static(cls, name)
                if hasattr(type(attr), "__set__"):
                    raise Unsupported(f"assignment to descriptor {cls.__name__}.{name}")
            except AttributeError:
                pass
        else:
            raise Unsupported(f"attribute assignment .{name} on {obj}")
        if obj.source is None:
            raise Unsupported("attribute assignment on an object with no source")
        self.output.record_setattr(obj, target, name, value)

    def _store_through_property(self, obj, name, value):
        """``obj.name = value`` where the class defines ``name`` as a ``property`` (and no
        ``__setattr__`` of its own): its setter is inlined, as CPython calls it -- the values it
        writes are stored (or replayed, for an outside object) as any attribute. A property
        without a setter raises AttributeError with CPython's message. False: not a property."""
        from .variables.objects import NewObjectVariable
        cls = obj.cls if isinstance(obj, NewObjectVariable) else type(obj.obj)
        if cls.__setattr__ is not object.__setattr__:
            return False
        prop = inspect.getattr_static(cls, name, None)
        if type(prop) is not property:
            return False
        if not isinstance(obj, NewObjectVariable):
            if obj.source is None:
                return False
            g = self.output.guards
            g.add(f"{g.ref(inspect.getattr_static)}(type({obj.source.expr()}), {name!r}, None) is {g.ref(prop)}",
                  f"{cls.__name__}.{name} is the same property")
        if prop.fset is None:
            from .variables.exceptions import raise_observed
            raise_observed(self, AttributeError, f"property {name!r} of {cls.__name__!r} object has no setter")
        if not isinstance(prop.fset, types.FunctionType):
            raise Unsupported(f"the setter of property {cls.__name__}.{name} is not a Python function")
        from .variables.functions import UserFunctionVariable
        UserFunctionVariable(prop.fset).call_function(self, [obj, value], {})
        return True

    def DELETE_ATTR(self, inst):
        """``del obj.name``: see variables/deletions.py (outside objects: replayed after the graph)."""
        from .variables.deletions import delete_attr
        delete_attr(self, self.pop(), inst.argval)

    # ------------------------------------------------------------------ operators
    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        sym = _NB_OPS[inst.arg]
        derived = _float_arith(self, sym, a, b)
        if derived is not None:
            self.push(derived)
            return
        self.push(binary_op(self, _BINARY[sym], a, b))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        op = inst.argval
        if op not in _COMPARE:
            raise Unsupported(f"comparison {op}")
        decided = _compare_unspec(self, op, a, b)
        if decided is not None:
            self.push(decided)
            return
        self.push(binary_op(self, _COMPARE[op], a, b))

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        res = _is(a, b, self)
        self.push(ConstantVariable(res != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        from .variables.dict_objects import DictObjectVariable
        if isinstance(container, DictObjectVariable):
            r = container.contains(self, item)
        elif isinstance(container, (DictVariable, SetVariable, EnvironVariable)):
            r = container.call_method(self, "__contains__", [item], {}).value
        elif isinstance(container, (BaseListVariable, IteratorVariable)) or (
                container.is_python_constant() and not isinstance(container, TensorVariable)):
            if not item.is_python_constant() or isinstance(item, TensorVariable):
                raise Unsupported("`in` with a non-constant item")
            iv = item.as_python_constant()
            if isinstance(container, ConstantVariable) or _is_enum_class(container):
                # a constant, or an Enum class (``1 in Color`` is True on 3.12+ and raises on
                # 3.11): Python's own ``in`` on the value
                try:
                    r = iv in container.as_python_constant()
                except TypeError as e:
                    raise Unsupported(str(e))
            else:
                r = False
                # an iterator is consumed up to the first match, as eager consumes it
                items = iter(lambda: container.next(self), None) if isinstance(container, IteratorVariable) \
                    else container.unpack(self)
                for x in items:
                    if not x.is_python_constant():
                        raise Unsupported("`in` over non-constant items")
                    if x.as_python_constant() == iv:
                        r = True
                        break
        else:
            raise Unsupported(f"`in` on {container}")
        self.push(ConstantVariable(r != bool(inst.arg)))

    def UNARY_NEGATIVE(self, inst):
        from .output_graph import UnspecFloatVariable
        v = self.pop()
        if isinstance(v, UnspecFloatVariable) and not v._guarded:
            # -lr of an unspecialized number stays unspecialized (see _float_arith)
            from .variables.random_calls import is_random_value, random_value_variable
            make = random_value_variable if is_random_value(v) else UnspecFloatVariable
            self.push(make(-v.raw, _ExprSource(f"(-{v.source.expr()})"), self.output, "F"))
            return
        self.push(unary_op(self, operator.neg, v))

    def UNARY_POSITIVE(self, inst):
        self.push(unary_op(self, operator.pos, self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(unary_op(self, operator.invert, self.pop()))

    def UNARY_NOT(self, inst):
        self.push(ConstantVariable(not self.pop().truthy(self)))

    def TO_BOOL(self, inst):  # PY313
        self.push(ConstantVariable(self.pop().truthy(self)))

    def CALL_INTRINSIC_1(self, inst):  # PY312
        name = inst.argrepr
        if name == "INTRINSIC_UNARY_POSITIVE":
            self.UNARY_POSITIVE(inst)
        elif name == "INTRINSIC_LIST_TO_TUPLE":
            self.push(TupleVariable(self.pop().unpack(self)))
        elif name == "INTRINSIC_STOPITERATION_ERROR":
            # a generator's StopIteration becomes RuntimeError (PEP 479)
            from .variables.exceptions import ExceptionVariable
            exc = self.pop()
            if isinstance(exc, ExceptionVariable) and issubclass(exc.exc_type, StopIteration):
                new = ExceptionVariable(RuntimeError, [ConstantVariable("generator raised StopIteration")])
                new.cause = new.context = exc
                new.suppress_context = True
                exc = new
            self.push(exc)
        else:
            raise Unsupported(f"CALL_INTRINSIC_1 {name}")

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().unpack(self)))

    # ------------------------------------------------------------------ subscripts
    def BINARY_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        self.push(self.getitem(obj, key))

    def STORE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        self.setitem(obj, key, value)

    def DELETE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        from .variables.deques import DequeVariable
        from .variables.dict_objects import DictObjectVariable
        if isinstance(obj, (ListVariable, DictVariable, DequeVariable)):
            obj.call_method(self, "__delitem__", [key], {})
        elif isinstance(obj, DictObjectVariable):
            obj.delitem(self, key)
        else:
            raise Unsupported(f"del on {obj}")

    # ------------------------------------------------------------------ match statements
    def GET_LEN(self, inst):
        self.push(BuiltinVariable(len).call_function(self, [self.peek(1)], {}))

    def _subject_flags(self, subject):
        try:
            return subject.python_type().__flags__
        except Unsupported:
            raise Unsupported(f"a match statement over {subject} (its type is not known while tracing)")

    def MATCH_SEQUENCE(self, inst):
        # CPython's test: the type's Py_TPFLAGS_SEQUENCE (list, tuple, range, deque... not str)
        self.push(ConstantVariable(bool(self._subject_flags(self.peek(1)) & (1 << 5))))

    def MATCH_MAPPING(self, inst):
        self.push(ConstantVariable(bool(self._subject_flags(self.peek(1)) & (1 << 6))))

    def MATCH_KEYS(self, inst):
        """``case {"k": v, ...}``: a tuple of the values when every key is present, else None."""
        keys, subject = self.peek(1), self.peek(2)
        values = []
        for key in keys.unpack(self):
            present = self._contains(subject, key)
            if not present:
                self.push(ConstantVariable(None))
                return
            values.append(self.getitem(subject, key))
        self.push(TupleVariable(values))

    def _contains(self, container, item):
        self.push(item)
        self.push(container)
        self.CONTAINS_OP(types.SimpleNamespace(arg=0, argval=0))
        res = self.pop()
        if not res.is_python_constant():
            raise Unsupported("a match statement's key test is not a constant")
        return bool(res.as_python_constant())

    # types whose single positional sub-pattern matches the subject itself (`case int(n)`)
    _SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)

    def MATCH_CLASS(self, inst):
        """``case Cls(p0, p1, kw=p2)``: a tuple of the attributes when the subject is an
        instance of ``Cls`` that has them, else None (positional ones by ``__match_args__``)."""
        names, cls, subject = self.pop(), self.pop(), self.pop()
        count = inst.arg
        hit = BuiltinVariable(isinstance).call_function(self, [subject, cls], {})
        if not hit.is_python_constant():
            raise Unsupported("a class pattern whose isinstance test is not a constant")
        if not hit.as_python_constant():
            self.push(ConstantVariable(None))
            return
        klass = cls.as_python_constant()
        attrs = []
        if count:
            match_args = getattr(klass, "__match_args__", None)
            if match_args is None and count == 1 and klass in self._SELF_MATCHING:
                values = [subject]
                count = 0
            else:
                values = []
                allowed = len(match_args) if isinstance(match_args, tuple) else 0
                if count > allowed:
                    from .variables.exceptions import raise_observed
                    raise_observed(self, TypeError, f"{klass.__name__}() accepts {allowed} positional "
                                                    f"sub-pattern{'' if allowed == 1 else 's'} ({count} given)")
                attrs = list(match_args[:count])
        else:
            values = []
        attrs += list(names.as_python_constant())
        for name in attrs:
            has = BuiltinVariable(hasattr).call_function(self, [subject, ConstantVariable(name)], {})
            if not has.is_python_constant():
                raise Unsupported(f"a class pattern reads attribute {name!r}, not known while tracing")
            if not has.as_python_constant():
                self.push(ConstantVariable(None))
                return
            values.append(self._getattr(subject, name))
        self.push(TupleVariable(values))

    def _slice_of(self, start, end):
        if not (start.is_python_constant() and end.is_python_constant()) or \
                isinstance(start, TensorVariable) or isinstance(end, TensorVariable):
            raise Unsupported("slice with non-constant bounds")
        return ConstantVariable(slice(start.as_python_constant(), end.as_python_constant()))

    def BINARY_SLICE(self, inst):  # PY312
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(self.getitem(obj, self._slice_of(start, end)))

    def STORE_SLICE(self, inst):  # PY312
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        value = self.pop()
        self.setitem(obj, self._slice_of(start, end), value)

    def BUILD_SLICE(self, inst):
        items = self.popn(inst.arg)
        if not all(i.is_python_constant() and not isinstance(i, TensorVariable) for i in items):
            raise Unsupported("slice with non-constant bounds")
        self.push(ConstantVariable(slice(*[i.as_python_constant() for i in items])))

    # ------------------------------------------------------------------ containers
    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        d = DictVariable({})
        for k, v in zip(items[::2], items[1::2]):
            d.items[d._key(k, self)] = v       # (constants; tensors and modules from outside)
        self.push(d)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        vals = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, vals))))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def BUILD_SET(self, inst):
        self.push(SetVariable.build(self, self.popn(inst.arg)))

    def SET_ADD(self, inst):
        v = self.pop()
        self._building(inst.arg).call_method(self, "add", [v], {})

    def SET_UPDATE(self, inst):
        v = self.pop()
        self._building(inst.arg).call_method(self, "update", [v], {})

    def _building(self, depth):
        """The container a LIST_APPEND/LIST_EXTEND/DICT_UPDATE builds. In a resume function
        that broke inside a comprehension it is an argument (an outside object): mutating it
        is a side effect, replayed after the graph."""
        c = self.peek(depth)
        if c.source is not None:
            if not hasattr(c, "_check_mutable"):
                raise Unsupported(f"building into {c}")
            c._check_mutable(self)
        return c

    def LIST_APPEND(self, inst):
        v = self.pop()
        self._building(inst.arg).items.append(v)

    def LIST_EXTEND(self, inst):
        v = self.pop()
        self._building(inst.arg).items.extend(v.unpack(self))

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        d = self.peek(inst.arg)
        d.call_method(self, "__setitem__", [k, v], {})

    def _mapping(self, v):
        from .variables.dict_objects import DictObjectVariable
        return v.as_dict_variable(self) if isinstance(v, DictObjectVariable) else v

    def DICT_UPDATE(self, inst):
        v = self._mapping(self.pop())
        d = self._building(inst.arg)
        if not isinstance(v, DictVariable):
            raise Unsupported("dict update from a non-dict")
        d.items.update(v.items)

    def DICT_MERGE(self, inst):
        v = self._mapping(self.pop())
        d = self.peek(inst.arg)
        if not isinstance(v, DictVariable):
            raise Unsupported("** of a non-dict")
        for k in v.items:
            if k in d.items:
                raise Unsupported(f"duplicate keyword argument {k!r} (the program raises)")
        d.items.update(v.items)

    # ------------------------------------------------------------------ f-strings
    def _format(self, value, conv, spec):
        from .variables.exceptions import ExceptionVariable
        if isinstance(value, ExceptionVariable) and (conv in (1, 2) or (conv == 0 and not spec)):
            value = value.to_str(self, "__repr__" if conv == 2 else "__str__")
            conv = 0
        if isinstance(value, TensorVariable) or not value.is_python_constant():
            raise Unsupported("formatting a non-constant value (e.g. a tensor) into a string")
        v = _specialised(value.as_python_constant())     # (s0 would print as 's0')
        if conv == 1:
            v = str(v)
        elif conv == 2:
            v = repr(v)
        elif conv == 3:
            v = ascii(v)
        return ConstantVariable(format(v, spec))

    def FORMAT_VALUE(self, inst):  # PY311/PY312
        spec = self.pop().as_python_constant() if inst.arg & 4 else ""
        value = self.pop()
        self.push(self._format(value, inst.arg & 3, spec))

    def CONVERT_VALUE(self, inst):  # PY313
        value = self.pop()
        self.push(self._format(value, inst.arg, ""))

    def FORMAT_SIMPLE(self, inst):  # PY313
        self.push(self._format(self.pop(), 0, ""))

    def FORMAT_WITH_SPEC(self, inst):  # PY313
        spec = self.pop().as_python_constant()
        self.push(self._format(self.pop(), 0, spec))

    # ------------------------------------------------------------------ unpacking
    def UNPACK_SEQUENCE(self, inst):
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg} (the program raises)")
        for v in reversed(items):
            self.push(v)

    def UNPACK_EX(self, inst):
        items = self.pop().unpack(self)
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack (the program raises)")
        mid = ListVariable(items[before:len(items) - after])
        out = items[:before] + [mid] + items[len(items) - after:]
        for v in reversed(out):
            self.push(v)

    # ------------------------------------------------------------------ iteration
    def GET_ITER(self, inst):
        from .variables.lists import iterator_of
        self.push(iterator_of(self, self.pop()))

    def FOR_ITER(self, inst):
        it = self.peek()
        if not isinstance(it, IteratorVariable):
            raise Unsupported("FOR_ITER over a non-iterator")
        v = it.next(self)
        if v is not None:
            if isinstance(v, LazyArgVariable) and self.instructions[self.ip].opname != "STORE_FAST":
                v = v.realize()
            self.push(v)
            return
        self.pop()
        self.jump(inst)
        # 3.12+: exhaustion skips END_FOR (and, in 3.13, the POP_TOP after it)
        if self.ip < len(self.instructions) and self.instructions[self.ip].opname == "END_FOR":
            self.ip += 1
            if PY313 and self.ip < len(self.instructions) and self.instructions[self.ip].opname == "POP_TOP":
                self.ip += 1

    # ------------------------------------------------------------------ jumps
    def JUMP_FORWARD(self, inst):
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP = JUMP_FORWARD

    def _pop_jump(self, inst, cond_fn):
        v = self.pop()
        if cond_fn(v):
            self.jump(inst)

    def POP_JUMP_IF_TRUE(self, inst):
        self._pop_jump(inst, lambda v: v.truthy(self))

    def POP_JUMP_IF_FALSE(self, inst):
        self._pop_jump(inst, lambda v: not v.truthy(self))

    def POP_JUMP_IF_NONE(self, inst):
        self._pop_jump(inst, lambda v: _is_none(v))

    def POP_JUMP_IF_NOT_NONE(self, inst):
        self._pop_jump(inst, lambda v: not _is_none(v))

    # PY311 directional variants
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):  # PY311
        if self.peek().truthy(self):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):  # PY311
        if not self.peek().truthy(self):
            self.jump(inst)
        else:
            self.pop()

    # ------------------------------------------------------------------ calls
    def KW_NAMES(self, inst):  # PY311/PY312
        self.kw_names = self.code.co_consts[inst.arg]

    def _callable_and_self(self, deeper, upper):
        if PY313:
            fn, self_ = deeper, upper
            return fn, (None if isinstance(self_, NullVariable) else self_)
        if isinstance(deeper, NullVariable):
            return upper, None
        return deeper, upper

    def _do_call(self, nargs, kw_names):
        args = self.popn(nargs)
        upper = self.pop()
        deeper = self.pop()
        fn, self_ = self._callable_and_self(deeper, upper)
        if self_ is not None:
            args = [self_] + args
        kwargs = {}
        if kw_names:
            nkw = len(kw_names)
            kwargs = dict(zip(kw_names, args[len(args) - nkw:]))
            args = args[:len(args) - nkw]
        self.push(self.call(fn, args, kwargs))

    def CALL(self, inst):
        kw = self.kw_names
        self.kw_names = None
        self._do_call(inst.arg, kw)

    def CALL_KW(self, inst):  # PY313
        kw = self.pop().as_python_constant()
        self._do_call(inst.arg, kw)

    def CALL_FUNCTION_EX(self, inst):
        kwargs_v = self.pop() if inst.arg & 1 else None
        args_v = self.pop()
        upper = self.pop()
        deeper = self.pop()
        fn, self_ = self._callable_and_self(deeper, upper)
        args = args_v.unpack(self)
        if self_ is not None:
            args = [self_] + args
        kwargs = {}
        if kwargs_v is not None:
            kwargs_v = self._mapping(kwargs_v)
            if not isinstance(kwargs_v, DictVariable):
                raise Unsupported("** of a non-dict")
            kwargs = dict(kwargs_v.items)
        self.push(self.call(fn, args, kwargs))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()
        fn = NestedFunctionVariable(code, self.f_globals, self.globals_source, code.co_name)
        if not PY313:
            flags = inst.arg
            if flags & 0x08:
                fn.closure = self.pop()
            if flags & 0x04:
                self.pop()
            if flags & 0x02:
                fn.kwdefaults = self.pop()
            if flags & 0x01:
                fn.defaults = _as_tuple(self, self.pop())
        self.push(fn)

    def SET_FUNCTION_ATTRIBUTE(self, inst):  # PY313
        fn = self.pop()
        attr = self.pop()
        flag = inst.arg
        if flag == 0x08:
            fn.closure = attr
        elif flag == 0x02:
            fn.kwdefaults = attr
        elif flag == 0x01:
            fn.defaults = _as_tuple(self, attr)
        self.push(fn)

    # ------------------------------------------------------------------ exceptions
    def _exception_instance(self, v):
        """What ``raise v`` raises: an exception instance, or a class called with no arguments."""
        from .variables.exceptions import ExceptionVariable
        if isinstance(v, ExceptionVariable):
            return v
        if v.is_python_constant() and not isinstance(v, TensorVariable):
            c = v.as_python_constant()
            if isinstance(c, type) and issubclass(c, BaseException):
                res = self.call(v, [], {})
                if isinstance(res, ExceptionVariable):
                    return res
        raise Unsupported(f"raise of {v}, which is not an exception made while tracing")

    def RAISE_VARARGS(self, inst):
        from .variables.exceptions import raise_exception
        if inst.arg == 0:
            cur = self.root.cur_exc
            if cur is None:
                # the handled exception of the caller (outside the frame) is not known here
                raise Unsupported("bare raise with no exception being handled in the traced code")
            raise ObservedException(cur, f"raise statement reached while tracing: {cur.describe()} (the program "
                                         f"raises)")
        if inst.arg == 1:
            raise_exception(self, self._exception_instance(self.pop()), statement=True)
        cause = self.pop()
        exc = self._exception_instance(self.pop())
        if not _is_none(cause):
            cause = self._exception_instance(cause)
        else:
            cause = None
        raise_exception(self, exc, cause, has_cause=True, statement=True)

    def LOAD_ASSERTION_ERROR(self, inst):
        from .variables.objects import ClassVariable
        self.push(ClassVariable(AssertionError))

    def PUSH_EXC_INFO(self, inst):
        exc = self.pop()
        root = self.root
        self.push(root.cur_exc if root.cur_exc is not None else ConstantVariable(None))
        self.push(exc)
        root.cur_exc = exc
        if self.depth == 0:
            self.handling.append(self.entered_from)

    def POP_EXCEPT(self, inst):
        prev = self.pop()
        self.root.cur_exc = None if _is_none(prev) else prev
        if self.depth == 0 and self.handling:
            self.handling.pop()

    def CHECK_EXC_MATCH(self, inst):
        from .variables.exceptions import ExceptionVariable, exception_match
        match = self.pop()
        exc = self.peek()
        if not isinstance(exc, ExceptionVariable) or not match.is_python_constant():
            raise Unsupported(f"except clause matching {match} against {exc}")
        self.push(ConstantVariable(exception_match(exc.exc_type, match.as_python_constant())))

    def RERAISE(self, inst):
        from .variables.exceptions import ExceptionVariable
        exc = self.pop()
        if not isinstance(exc, ExceptionVariable):
            raise Unsupported(f"re-raise of {exc}")
        raise ObservedException(exc)

    def WITH_EXCEPT_START(self, inst):
        """An exception leaves a ``with`` block: call its exit with the exception (stack: exit,
        lasti, previous exception, exception)."""
        from .variables.exceptions import ExceptionVariable
        exc = self.peek(1)
        exit_v = self.peek(4)
        if not isinstance(exc, ExceptionVariable) or not hasattr(exit_v, "exit_with"):
            raise Unsupported(f"an exception raised while tracing leaves a with block over {exit_v}")
        self.push(exit_v.exit_with(self, exc))

    def BEFORE_WITH(self, inst):
        from .variables.ctx import AutocastVariable, GradModeVariable, NullContextVariable
        ctx = self.pop()
        if isinstance(ctx, AutocastVariable):
            self.push(ctx.enter(self))
            self.push(ctx)
            return
        if isinstance(ctx, NullContextVariable):
            self.push(ctx.enter(self))
            self.push(ctx.enter_result)
            return
        if not isinstance(ctx, GradModeVariable):
            from .variables.user_ctx import enter_user_context
            exit_var, value = enter_user_context(self, ctx)
            self.push(exit_var)
            self.push(value)
            return
        self.push(ctx.enter(self))
        self.push(ConstantVariable(None))

    # ------------------------------------------------------------------ generators (materialised)
    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))

    def YIELD_VALUE(self, inst):
        if self.lazy_generator and inst.offset in _suspending_offsets(self.code):
            # a generator paused inside a try/with block: if its consumer stops early, eager runs
            # the block's cleanup when the generator is closed (garbage-collected), which a trace
            # of the consumer does not see
            raise Unsupported("a generator that yields inside a try or with block")
        if self.pause_at_yield:
            self.result = self.pop()
            self.paused = True
            self.push(ConstantVariable(None))      # what the yield evaluates to on resuming: send(None)
            return
        if self.yielded is None:
            raise Unsupported("yield outside a materialised generator")
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))

    def IMPORT_NAME(self, inst):
        """``import`` of an already-imported module has no side effect: model it as a lookup."""
        import importlib.util
        from .variables.objects import PythonModuleVariable
        fromlist = self.pop().as_python_constant()
        level = self.pop().as_python_constant()
        name = inst.argval
        try:
            full = importlib.util.resolve_name("." * level + name, self.f_globals.get("__package__")) \
                if level else name
        except Exception as e:
            raise Unsupported(f"import {name}: {e}")
        if not fromlist and level == 0:
            full = full.partition(".")[0]
        mod = sys.modules.get(full)
        trusted = full == "ember" or full.startswith("ember.")
        if mod is None and trusted:
            # one of ember's own modules that a lazy import inside ember (nn.LSTM's ``from
            # ...nn.utils.rnn import PackedSequence``) reaches first: load it now, outside the
            # trace's fake-tensor modes -- the eager code would have loaded it at this point too
            mod = _import_outside_trace(full)
        if mod is None:
            _raise_if_not_found(self, full)
            raise Unsupported(f"import of {full}, which is not imported yet (importing is a side effect)")
        if not trusted:
            # (the lookup's answer: removing the module from sys.modules makes the import real again)
            g = self.output.guards
            g.add(f"{g.ref(sys.modules)}.get({full!r}) is {g.ref(mod)}", f"module {full} is imported")
        src = _ObjSource(self.output.obj_ref(mod))
        self.push(PythonModuleVariable(mod, src, trusted=trusted))

    def IMPORT_FROM(self, inst):
        from .variables.objects import PythonModuleVariable
        mod = self.peek()
        name = inst.argval
        if isinstance(mod, PythonModuleVariable) and not hasattr(mod.module, name):
            # ``from pkg import name``: an attribute, else the submodule pkg.name if imported
            full = f"{mod.module.__name__}.{name}"
            sub = sys.modules.get(full)
            if sub is not None:
                self.push(PythonModuleVariable(sub, _ObjSource(self.output.obj_ref(sub)),
                                               trusted=full.startswith("ember.")))
                return
            where = getattr(mod.module, "__file__", None) or "unknown location"
            _raise_if_not_found(self, full, f"cannot import name {name!r} from {mod.module.__name__!r} ({where})",
                                mod.module.__name__, getattr(mod.module, "__file__", None))
            raise Unsupported(f"from {mod.module.__name__} import {name}: the submodule is not imported yet "
                              f"(importing is a side effect)")
        self.push(mod.var_getattr(self, name))

    def STORE_GLOBAL(self, inst):
        """``global x; x = value``: recorded and replayed after the graph."""
        value = self.pop()
        if self.globals_source is not None:
            raise Unsupported(f"assigning global {inst.argval!r} of another module")
        key = (id(self.f_globals), inst.argval)
        self.output.attr_overlay[key] = value
        self.output.side_effects.append(("global", "G", inst.argval, value))

    def DELETE_GLOBAL(self, inst):
        from .variables.deletions import delete_global
        delete_global(self, inst.argval)

    def LOAD_SUPER_ATTR(self, inst):  # PY312
        from .variables.objects import make_super
        obj = self.pop()
        cls = self.pop()
        self.pop()   # the global super
        attr = make_super(self, [cls, obj]).var_getattr(self, inst.argval)
        if inst.arg & 1:
            if PY313:
                self.push(attr)
                self.push(_NULL)
            else:
                self.push(_NULL)
                self.push(attr)
        else:
            self.push(attr)


def _raise_if_not_found(tx, full, msg=None, parent=None, path=None):
    """``import full`` of a module that is not imported: if no finder can find it, the import
    raises ModuleNotFoundError (raised into the trace, so ``try: import x / except
    ImportError:`` needs no break). Looking it up has no effect on the program (its parent
    packages must be imported already: finding ``a.b`` imports ``a``). The compiled code
    is guarded on the name still not being in ``sys.modules``; a module installed on disk
    later in the process (a finder now finding it) is not noticed, as with any import made
    while tracing."""
    import importlib.util
    parts = full.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            return            # finding the child would import the parent: a real side effect
    try:
        spec = importlib.util.find_spec(full)
    except (ImportError, ValueError, AttributeError):
        return
    if spec is not None:
        return
    g = tx.output.guards
    g.add(f"{full!r} not in {g.ref(sys.modules)}", f"module {full} is not imported")
    from .variables.exceptions import raise_observed
    if msg is not None:
        raise_observed(tx, ImportError, msg, name=parent, path=path)
    raise_observed(tx, ModuleNotFoundError, f"No module named {full!r}", name=full)


def _exception_table(code):
    try:
        return dis._parse_exception_table(code)
    except Exception:   # noqa: BLE001
        return None


def _handler_for(table, offset):
    """The exception-table entry covering ``offset`` (entries do not overlap), or None."""
    if table is None:
        raise Unsupported("exception table of the frame not readable")
    for e in table:
        if e.start <= offset < e.end:
            return e
    return None


class _ObjSource:
    """A source for an object bound by name in the generated functions' globals."""

    def __init__(self, name):
        self._name = name

    def expr(self):
        return self._name

    def name(self):
        return self._name


class _GlobalIn(GlobalSource):
    """A global of another module's function that was inlined."""

    def __init__(self, gsrc, gname):
        super().__init__(gname)
        self.gsrc = gsrc

    def expr(self):
        return f"{self.gsrc.expr()}[{self.gname!r}]"


def _as_tuple(tx, v):
    if isinstance(v, TupleVariable):
        return v
    return TupleVariable(v.unpack(tx))


def _is_none(v):
    if isinstance(v, ConstantVariable):
        return v.value is None
    if isinstance(v, (TensorVariable, BaseListVariable, DictVariable, NNModuleVariable)):
        return False
    if v.is_python_constant():
        return v.as_python_constant() is None
    return False


def _is(a, b, tx=None):
    """``a is b`` for two trackers. Two outside objects compared by identity (``self.obj is
    other``) are guarded to stay so (``tx``): their trackers are guarded by type only, and
    another call may pass one object twice, or two."""
    if isinstance(a, ConstantVariable) and isinstance(b, ConstantVariable):
        return a.value is b.value
    if _is_none(a) or _is_none(b):
        return _is_none(a) and _is_none(b)
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        return a.node is b.node
    if a is b:
        return True
    from .variables.deques import DequeVariable
    from .variables.exceptions import ExceptionVariable
    from .variables.objects import NewObjectVariable
    one_each = (NewObjectVariable, ExceptionVariable, ListVariable, DictVariable, SetVariable, DequeVariable)
    if isinstance(a, one_each) or isinstance(b, one_each):
        return False       # one tracker per object (made in the frame, or an outside container)
    for attr in ("module", "obj", "fn", "cls"):
        if hasattr(a, attr) and hasattr(b, attr):
            same = getattr(a, attr) is getattr(b, attr)
            if tx is not None and a.source is not None and b.source is not None:
                e = f"({a.source.expr()}) {'is' if same else 'is not'} ({b.source.expr()})"
                tx.output.guards.add(e, e)
            return same
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False
    if a.is_python_constant() and b.is_python_constant():
        return a.as_python_constant() is b.as_python_constant()
    raise Unsupported(f"`is` between {a} and {b}")


def _import_outside_trace(name):
    """``importlib.import_module(name)`` with the dispatch modes and grad mode of a plain eager
    import (a module-level tensor must not be made fake); None when it cannot be imported."""
    import importlib
    from .._state import STATE
    modes, grad = STATE.modes[:], STATE.grad_enabled
    STATE.modes[:] = []
    STATE.grad_enabled = True
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    finally:
        STATE.modes[:] = modes
        STATE.grad_enabled = grad


def _is_masked_fill(obj, key, value) -> bool:
    """``obj[key] = value`` is a masked fill: ``key`` a boolean tensor with the shape of obj's
    leading dims and ``value`` a Python number (a constant or a captured ``.item()``) or a 0-d
    tensor of obj's dtype."""
    if not isinstance(key, TensorVariable) or key.example.dtype.name != "bool":
        return False
    m, o = key.example, obj.example
    if not 0 < m.dim() <= o.dim() or tuple(m.shape) != tuple(o.shape[:m.dim()]):
        return False
    if isinstance(value, TensorVariable):
        return value.example.dim() == 0 and value.example.dtype == o.dtype
    from .variables.sym_scalar import SymScalarVariable
    if isinstance(value, SymScalarVariable):
        return True    # a captured ``.item()``: masked_fill_ converts it to x's dtype (sym_scalar.py)
    return isinstance(value, ConstantVariable) and type(value.as_python_constant()) in (int, float, bool)


def _check_index(key):
    items = key.items if isinstance(key, BaseListVariable) else [key]     # a tuple or a list of indices
    for k in items:
        if isinstance(k, TensorVariable) and k.example.dtype.name in ("bool", "uint8"):
            raise Unsupported("boolean-mask indexing (output shape depends on tensor data)")
        if isinstance(k, BaseListVariable):
            _check_index(k)


def run_frame(output, code, func, argslots, break_at=None, break_reason=None):
    """Trace the frame; returns the tracker of its return value, or a GraphBreak when
    ``break_at`` (a top-level instruction index from a first, failed trace) is reached."""
    from .._state import STATE
    from .resume import is_resume

    class _Root(InstructionTranslator):
        pass

    tx = _Root.__new__(_Root)
    # wrap arguments lazily would save guards; eager wrapping is simpler and safe
    InstructionTranslator.__init__(tx, output, code, func.__globals__, None, {}, [], depth=0,
                                   break_at=break_at, break_reason=break_reason)
    names = code.co_varnames
    resume = is_resume(code)
    seen = {}
    for i, v in enumerate(argslots):
        src = LocalSource(names[i], i)
        if resume:
            tx.locals[names[i]] = _wrap_resume_arg(tx, v, src, names[i], seen)
        elif i == 0 and names[0] == ".0" and code.co_name in _COMPREHENSIONS and _modelled_iterator(v):
            # a 3.11 comprehension run as its own frame (its caller broke the graph at the call)
            tx.locals[".0"] = _wrap_iterator_arg(tx, v, src)
        elif i in output.unspec_scalars and type(v) in (int, float):
            tx.locals[names[i]] = output.unspec_number(v, src, names[i])
        else:
            tx.locals[names[i]] = wrap(tx, v, src)
    if resume and names and "__class__" in code.co_freevars and isinstance(tx.locals.get(names[0]), LazyArgVariable):
        tx.locals[names[0]] = tx.locals[names[0]].realize()   # zero-argument super() reads it directly
    cells = func.__closure__ or ()
    closure = []
    for i, (name, cell) in enumerate(zip(code.co_freevars, cells)):
        def load(cell=cell, i=i, name=name):
            try:
                v = cell.cell_contents
            except ValueError:
                raise Unsupported(f"free variable {name!r} referenced before assignment")
            src = ClosureSource(FuncSource(), i, name)
            if resume and type(v) is types.FunctionType and v.__name__ not in tx.f_globals:
                return _wrap_function_by_code(tx, v, src)
            return wrap(tx, v, src)
        cv = CellVariable.for_real_cell(tx, cell, load, f"__func.__closure__[{i}]")
        cv.cell_expr = f"__func.__closure__[{i}]"   # the same cell, for a resume function's closure
        closure.append(cv)
    tx.closure = closure
    try:
        return tx.run()
    finally:
        output.final_grad_mode = STATE.grad_enabled
        output.final_autocast = _autocast_regions(STATE.autocast)


_NO_REGIONS = object()     # OutputGraph.exc_autocast before a resumed autocast block sets it


def _autocast_regions(state):
    from .variables.ctx import _regions
    return _regions(state)


def _tuple_iter_rest(it):
    """The items a tuple iterator has left, without advancing it."""
    r = it.__reduce__()
    if len(r) < 3:
        return ()
    return r[1][0][r[2]:]


_tuple_iter_rest.__module__ = "ember.dynamo.symbolic_convert"
_TUPLE_ITER = type(iter(()))
_LIST_ITER = type(iter([]))
_LIST_REV_ITER = type(reversed([]))
_RANGE_ITER = type(iter(range(0)))
# iterators an argument may be, modelled item by item: a resume function's loop iterator (a
# tuple's, built at the break; a list's, the comprehension's own, handed on), and a 3.11
# comprehension frame's ``.0`` (whatever its caller's GET_ITER made of a tuple, list or range;
# a loop's ``reversed(ys)``)
_MODELLED_ITERS = (_TUPLE_ITER, _LIST_ITER, _LIST_REV_ITER, _RANGE_ITER)
# the code objects of 3.11's comprehensions (3.12 inlines them, PEP 709); a generator
# expression's frame is a generator and is not traced standalone
_COMPREHENSIONS = ("<listcomp>", "<setcomp>", "<dictcomp>")


def _list_iter_left(it):
    """How many items a list iterator (or a reverse one) has left: the list's length now, less
    its position (a reverse one's index, plus one, while that is in the list)."""
    return it.__length_hint__()


def _list_iter_at(it, k):
    """Item ``k`` of what a list iterator (or a reverse one) has left, without advancing it."""
    r = it.__reduce__()
    return r[1][0][r[2] - k if type(it) is _LIST_REV_ITER else r[2] + k]


def _list_iter_advanced(it, k):
    """A list iterator over ``it``'s list, ``k`` items further on: what a resume function gets
    at a break in a loop over it. Not a snapshot of the items: the call that breaks the graph
    may change the list, and CPython's iterator would see that. A new iterator, not ``it``
    moved on: the code at the break still reads the items it holds relative to where ``it``
    stood (``_list_iter_at``), and nothing else holds ``it`` (a comprehension's ``.0``, a resume
    function's argument). The same for a reverse one, ``k`` items further down."""
    r = it.__reduce__()
    if len(r) < 3:
        return iter(())         # exhausted: it stays so
    if type(it) is _LIST_REV_ITER:
        from .variables.lists import _list_rev_iter_from
        return _list_rev_iter_from(r[1][0], r[2] - k)
    new = iter(r[1][0])
    new.__setstate__(r[2] + k)
    return new


def _list_iter_seq(it):
    """The list a list iterator walks (None once exhausted)."""
    r = it.__reduce__()
    return r[1][0] if len(r) >= 3 else None


def _enum_inner(it):
    """The iterator an ``enumerate`` object walks."""
    return it.__reduce__()[1][0]


def _enum_count(it):
    """The count an ``enumerate`` object gives its next item."""
    return it.__reduce__()[1][1]


def _zip_part(it, k):
    """The ``k``-th iterator a ``zip`` object walks."""
    return it.__reduce__()[1][k]


def _modelled_iterator(v):
    """Whether ``_wrap_iterator_arg`` can model iterator ``v``: a tuple, list or range iterator,
    or an ``enumerate``/``zip`` over such (what a graph break rebuilds a loop's iterator as)."""
    t = type(v)
    if t in _MODELLED_ITERS:
        return True
    if t is enumerate:
        r = v.__reduce__()
        return len(r) >= 2 and len(r[1]) == 2 and _modelled_iterator(r[1][0])
    if t is zip:
        r = v.__reduce__()
        return len(r) in (2, 3) and all(_modelled_iterator(i) for i in r[1])    # (3: strict=True)
    from .variables import resumable_iters as ri
    if t is ri.Chain:
        return v.cur is None or _modelled_iterator(v.cur)
    if t in (ri.Pairwise, ri.ISlice):
        return v.it is not None and _modelled_iterator(v.it)
    if t is ri.ZipLongest:
        return all(i is None or _modelled_iterator(i) for i in v.its) and any(i is not None for i in v.its)
    if t is ri.DictIter:
        return True
    if t in (ri.TakeWhile, ri.DropWhile, ri.Accumulate, ri.StarMap, ri.Filter):
        return _modelled_iterator(v.it)
    if t is ri.SetIter:
        return type(v.s) is set
    if t is ri.ChainFrom:
        return v.it is not None and _modelled_iterator(v.it) and (v.cur is None or _modelled_iterator(v.cur))
    if t is ri.Compress:
        return _modelled_iterator(v.data) and _modelled_iterator(v.sel)
    if t in (ri.Count, ri.Repeat):
        return True
    if t is ri.CallIter:
        return v.fn is not None
    if t is ri.Cycle:
        return v.it is None or _modelled_iterator(v.it)
    return False


for _f in (_list_iter_left, _list_iter_at, _list_iter_advanced, _list_iter_seq, _enum_inner, _enum_count,
           _zip_part):
    _f.__module__ = "ember.dynamo.symbolic_convert"


class _IterPartSource(GlobalSource):
    """``fn(base, *args)``: a part of an iterator argument (an enumerate's inner iterator, a
    zip's k-th), read without advancing anything."""

    def __init__(self, base, fn_name, *args):
        super().__init__(f"{base.name()}_{fn_name}_{'_'.join(map(str, args))}")
        self.base, self.fn_name, self.args = base, fn_name, args

    def expr(self):
        return f"{self.fn_name}({self.base.expr()}{''.join(f', {a!r}' for a in self.args)})"


class _IterItemSource(GlobalSource):
    """Item ``k`` of what a tuple (or list, range) iterator argument has left."""

    def __init__(self, base, fn_name, k, call=False):
        super().__init__(f"{base.name()}_{k}")
        self.base, self.fn_name, self.k, self.call = base, fn_name, k, call

    def expr(self):
        if self.call:      # _list_iter_at(it, k): no copy of the list
            return f"{self.fn_name}({self.base.expr()}, {self.k})"
        return f"{self.fn_name}({self.base.expr()})[{self.k}]"

    def name(self):
        return f"{self.base.name()}_item{self.k}"


class ResumedIteratorVariable(IteratorVariable):
    """A loop's iterator handed to a resume function (``iter(tuple)`` built at the break).

    Items are wrapped (and guarded) only when the loop takes them, and the length guard
    says only what the trace saw: "more than k left" for each item taken, "exactly k left"
    when the loop ran out. So a loop that breaks in every iteration and does not look at
    the items reuses one entry of the resume function for all the iterations."""

    def __init__(self, tx, source, n, over_list=False):
        super().__init__([None] * n)
        self.tx = tx
        self.src = source
        self.over_list = over_list
        if over_list:
            # (read in place: a length hint and an index, no copy of the list per guard)
            self.rest = tx.output.obj_ref(_list_iter_at)
            self.left = tx.output.obj_ref(_list_iter_left)
        else:
            self.rest = tx.output.obj_ref(_tuple_iter_rest)

    def _guard_len(self, op, k):
        if self.over_list:
            e = f"{self.left}({self.src.expr()}) {op} {k}"
        else:
            e = f"len({self.rest}({self.src.expr()})) {op} {k}"
        self.tx.output.guards.add(e, e)

    def _item(self, k, lazy=False):
        v = self.items[k]
        if v is None:
            if self.over_list:
                v = LazyArgVariable(self.tx, _list_iter_at(self.value, k),
                                    _IterItemSource(self.src, self.rest, k, call=True))
            else:
                v = LazyArgVariable(self.tx, _tuple_iter_rest(self.value)[k], _IterItemSource(self.src, self.rest, k))
        if not lazy and isinstance(v, LazyArgVariable):
            v = v.realize()
        self.items[k] = v
        return v

    def next(self, tx):
        if self.pos >= len(self.items):
            self._guard_len("==", self.pos)
            return None
        self._guard_len(">", self.pos)
        v = self._item(self.pos, lazy=True)   # FOR_ITER realizes it unless it is just stored
        self.pos += 1
        return v

    def unpack(self, tx):
        self._guard_len("==", len(self.items))
        rest = [self._item(k) for k in range(self.pos, len(self.items))]
        self.pos = len(self.items)
        return rest

    def remaining_expr(self, out):
        if self.over_list:
            return f"{out.obj_ref(_list_iter_advanced)}({self.src.expr()}, {self.pos})"
        return f"{self.rest}({self.src.expr()})[{self.pos}:]"

    def __repr__(self):
        return f"ResumedIteratorVariable({self.pos}/{len(self.items)})"


def _wrap_iterator_arg(tx, v, src):
    """A tuple, list or range iterator argument, its items taken (and guarded) as the loop
    takes them. A list's are read from the list at that moment, as CPython's iterator reads
    them: so the trace refuses to mutate that list meanwhile (``live_list_iters``),
    and a break hands on an iterator over the list itself (``remaining_expr``)."""
    tx.output.guards.type_match(src, v)
    if type(v) in (enumerate, zip):
        from .variables.builtin import enumerate_of, zip_of
        ref = tx.output.obj_ref
        if type(v) is enumerate:
            inner, count = v.__reduce__()[1]
            e = f"{ref(_enum_count)}({src.expr()}) == {count!r}"
            tx.output.guards.add(e, e)
            return enumerate_of(_wrap_iterator_arg(tx, inner, _IterPartSource(src, ref(_enum_inner))), count)
        r = v.__reduce__()
        parts, strict = r[1], len(r) == 3
        red = f"{ref(type(v).__reduce__)}({src.expr()})"
        e = f"len({red}[1]) == {len(parts)} and len({red}) == {len(r)}"     # (3 items: strict)
        tx.output.guards.add(e, e)
        return zip_of([_wrap_iterator_arg(tx, p, _IterPartSource(src, ref(_zip_part), k))
                       for k, p in enumerate(parts)], strict)
    from .variables import resumable_iters as ri
    if type(v) in ri.RESUMABLE:
        return _wrap_resumable_iter(tx, v, src)
    if type(v) in (_LIST_ITER, _LIST_REV_ITER):
        res = ResumedIteratorVariable(tx, src, _list_iter_left(v), over_list=True)
        if _list_iter_seq(v) is not None:
            tx.output.live_list_iters.append((src, _list_iter_seq(v)))
    else:
        res = ResumedIteratorVariable(tx, src, len(_tuple_iter_rest(v)))
    res.value = v
    return res


def _dict_iter_ok(it):
    """Whether a ``DictIter`` argument can be modelled: its dict has the keys it had at the break,
    in order (a breaking call that added, removed or replaced a key leaves the loop to CPython)."""
    if it.it is None:
        return True
    base = collections.OrderedDict if it.ordered else dict
    return type(it.d) in (dict, collections.OrderedDict, collections.defaultdict) and \
        len(it.d) == len(it.keys) and list(base.keys(it.d)) == it.keys


def _dict_iter_left(it):
    """How many items a ``DictIter`` has left (its dict unchanged: ``_dict_iter_ok``)."""
    return 0 if it.it is None else len(it.keys) - it.pos


def _dict_iter_key(it, k):
    """The key of item ``k`` of what a ``DictIter`` has left, without advancing it."""
    return it.keys[it.pos + k]


def _dict_iter_at(it, k):
    """Item ``k`` of what a ``DictIter`` has left (a key, a value or a pair), read from its dict now."""
    key = it.keys[it.pos + k]
    if it.kind == "keys":
        return key
    return it.d[key] if it.kind == "values" else (key, it.d[key])


def _dict_iter_advanced(it, k):
    """A ``DictIter`` over ``it``'s dict, ``k`` items further on (a new one: the code at the
    break still reads items relative to where ``it`` stood)."""
    from .variables.resumable_iters import DictIter
    if it.it is None:
        return iter(())
    return DictIter(it.d, it.kind, it.ordered, it.pos + k)


for _f in (_dict_iter_ok, _dict_iter_left, _dict_iter_key, _dict_iter_at, _dict_iter_advanced):
    _f.__module__ = "ember.dynamo.symbolic_convert"


class ResumedDictIteratorVariable(ResumedIteratorVariable):
    """A loop's dict iterator handed to a resume function (``resumable_iters.DictIter``).

    As for a list (``ResumedIteratorVariable``), the guards say only what the trace saw ("more
    than k left", "exactly k left") and an item is read -- from the dict, through the iterator --
    only when the loop takes it, so a loop breaking in every iteration that does not look at its
    keys reuses one entry for all its iterations. Once the trace holds the dict itself (it was
    read through another name, and may have been changed), items are taken from that tracker
    instead, as ``DictKeyIteratorVariable`` takes them: the value as the trace left it, a size
    change raising ``RuntimeError`` at the step, the key guarded."""

    def __init__(self, tx, src, v):
        if not _dict_iter_ok(v):
            raise Unsupported("a dict's keys changed in the call that broke the graph inside a loop over it")
        ref = tx.output.obj_ref
        e = f"{ref(_dict_iter_ok)}({src.expr()})"
        tx.output.guards.add(e, f"{src.expr()}'s dict has the keys it had at the break")
        e = f"({src.expr()}.kind, {src.expr()}.ordered) == {(v.kind, v.ordered)!r}"
        tx.output.guards.add(e, e)
        IteratorVariable.__init__(self, [None] * _dict_iter_left(v))
        self.tx, self.src, self.over_list, self.value = tx, src, False, v
        self.left, self.at = ref(_dict_iter_left), ref(_dict_iter_at)
        self.py_type = type(v)

    def _guard_len(self, op, k):
        e = f"{self.left}({self.src.expr()}) {op} {k}"
        self.tx.output.guards.add(e, e)

    def _tracker(self):
        return self.tx.output.containers.get(id(self.value.d))

    def next(self, tx):
        d = self._tracker()
        if d is not None and self.pos >= len(self.items) and not self.value.ordered:
            if len(d.items) != len(self.value.keys):
                from .variables.exceptions import raise_observed     # (after the last item too, as CPython)
                raise_observed(tx, RuntimeError, "dictionary changed size during iteration")
            if list(d.items) != self.value.keys:     # (CPython's table decides: a new key may follow)
                raise Unsupported("a dict's keys changed during a loop over it (one removed, another added)")
        return super().next(tx)

    def _item(self, k, lazy=False):
        v = self.items[k]
        if v is None:
            d = self._tracker()
            if d is not None:
                v = self._tracked_item(d, k)
            else:
                v = LazyArgVariable(self.tx, _dict_iter_at(self.value, k),
                                    _IterItemSource(self.src, self.at, k, call=True))
        if not lazy and isinstance(v, LazyArgVariable):
            v = v.realize()
        self.items[k] = v
        return v

    def _tracked_item(self, d, k):
        from .variables.lists import dict_entry
        it = self.value
        if len(d.items) != len(it.keys) or (it.ordered and (d.removals or list(d.items) != it.keys)):
            from .variables.exceptions import raise_observed     # (any key change, for an OrderedDict's)
            raise_observed(self.tx, RuntimeError, "OrderedDict mutated during iteration" if it.ordered
                           else "dictionary changed size during iteration")
        if list(d.items) != it.keys:
            raise Unsupported("a dict's keys changed during a loop over it (one removed, another added)")
        key = it.keys[it.pos + k]
        e = f"{self.tx.output.obj_ref(_dict_iter_key)}({self.src.expr()}, {k}) == {self.tx.output.obj_ref(key)}"
        self.tx.output.guards.add(e, f"the loop's item {k} after the break has key {key!r}")
        return dict_entry(self.tx, d, key, it.kind)

    def remaining_expr(self, out):
        d = self._tracker()
        if d is not None and (list(d.items) != self.value.keys or (self.value.ordered and d.removals)):
            raise Unsupported("a dict changed during a loop over it, alive across a graph break")
        return f"{out.obj_ref(_dict_iter_advanced)}({self.src.expr()}, {self.pos})"

    def __repr__(self):
        return f"ResumedDictIteratorVariable({self.value.kind} {self.pos}/{len(self.items)})"


def _wrap_resumable_iter(tx, v, src):
    """An itertools chain/pairwise/zip_longest/islice/takewhile/dropwhile/accumulate/compress handed
    on by a break (``resumable_iters``):
    the same lazy tracker as the trace made, over its parts -- its iterators modelled as
    iterator arguments, the rest (items, fill values, iterables not reached) read through
    their attributes when the loop needs them (each guarded then, as any argument)."""
    from .source import AttrSource, GetItemSource
    from .variables import builtin as b
    from .variables import resumable_iters as ri
    g = tx.output.guards
    part = functools.partial(_wrap_iterator_arg, tx)
    t = type(v)
    if t is ri.DictIter:
        return ResumedDictIteratorVariable(tx, src, v)
    if t is ri.Chain:
        e = f"({src.expr()}.cur is None, len({src.expr()}.rest)) == {(v.cur is None, len(v.rest))!r}"
        g.add(e, e)
        rest_src = AttrSource(src, "rest")
        rest = [LazyArgVariable(tx, r, GetItemSource(rest_src, k)) for k, r in enumerate(v.rest)]
        cur = None if v.cur is None else part(v.cur, AttrSource(src, "cur"))
        return b._chain_lazy(rest, cur)
    if t is ri.Pairwise:
        return b._pairwise_lazy(tx, part(v.it, AttrSource(src, "it")), wrap(tx, v.old, AttrSource(src, "old")))
    if t is ri.ISlice:
        e = f"({src.expr()}.cnt, {src.expr()}.next, {src.expr()}.stop, {src.expr()}.step) == " \
            f"{(v.cnt, v.next, v.stop, v.step)!r}"
        g.add(e, e)
        return b.islice_of(part(v.it, AttrSource(src, "it")), v.cnt, v.next, v.stop, v.step)
    if t in (ri.TakeWhile, ri.DropWhile):
        e = f"{src.expr()}.done is {v.done!r}"
        g.add(e, e)
        return b.while_of(t is ri.TakeWhile, _wrap_held(tx, v.pred, AttrSource(src, "pred")),
                          part(v.it, AttrSource(src, "it")), v.done)
    if t is ri.Accumulate:
        e = f"({src.expr()}.func is None, {src.expr()}.has_total, {src.expr()}.pending) == " \
            f"{(v.func is None, v.has_total, v.pending)!r}"
        g.add(e, e)
        func = None if v.func is None else _wrap_held(tx, v.func, AttrSource(src, "func"))
        total = wrap(tx, v.total, AttrSource(src, "total")) if v.has_total else None
        return b.accumulate_of(part(v.it, AttrSource(src, "it")), func, total, v.pending, v.has_total)
    if t is ri.StarMap:
        e = f"{src.expr()}.is_map is {v.is_map!r}"
        g.add(e, e)
        return b.starmap_of(_wrap_held(tx, v.fn, AttrSource(src, "fn")), part(v.it, AttrSource(src, "it")),
                            map if v.is_map else itertools.starmap)
    if t is ri.Filter:
        e = f"{src.expr()}.fn is None" if v.fn is None else f"{src.expr()}.fn is not None"
        g.add(e, e)
        fn = ConstantVariable(None) if v.fn is None else _wrap_held(tx, v.fn, AttrSource(src, "fn"))
        return b.filter_of(fn, part(v.it, AttrSource(src, "it")))
    if t is ri.ChainFrom:
        e = f"{src.expr()}.cur is None" if v.cur is None else f"{src.expr()}.cur is not None"
        g.add(e, e)
        cur = None if v.cur is None else part(v.cur, AttrSource(src, "cur"))
        return b.chain_from_of(part(v.it, AttrSource(src, "it")), cur)
    if t is ri.SetIter:
        from .variables.sets import SetIteratorVariable
        e = f"({src.expr()}.size, {src.expr()}.pos) == {(v.size, v.pos)!r}"
        g.add(e, e)
        g.add(f"{src.expr()}.rest == {g.ref(v.rest)}", f"{src.expr()} has {v.rest[v.pos:]!r} left")
        return SetIteratorVariable(wrap(tx, v.s, AttrSource(src, "s")), v.rest[v.pos:], v.size)
    if t is ri.Compress:
        return b.compress_of(part(v.data, AttrSource(src, "data")), part(v.sel, AttrSource(src, "sel")))
    if t is ri.Count:
        # its numbers are constants of the trace (as a range's): guarded with their types
        e = f"(type({src.expr()}.cur), {src.expr()}.cur, type({src.expr()}.step), {src.expr()}.step) == " \
            f"({g.ref(type(v.cur))}, {v.cur!r}, {g.ref(type(v.step))}, {v.step!r})"
        g.add(e, f"{src.expr()} is count({v.cur!r}, {v.step!r})")
        return b.count_of(v.cur, v.step)
    if t is ri.CallIter:
        return b.call_iter_of(_wrap_held(tx, v.fn, AttrSource(src, "fn")), wrap(tx, v.sentinel, AttrSource(src, "sentinel")))
    if t is ri.Repeat:
        return b.repeat_of(LazyArgVariable(tx, v.obj, AttrSource(src, "obj")))
    if t is ri.Cycle:
        e = f"({src.expr()}.it is None, len({src.expr()}.saved), {src.expr()}.pos) == " \
            f"{(v.it is None, len(v.saved), v.pos)!r}"
        g.add(e, e)
        saved_src = AttrSource(src, "saved")
        saved = [LazyArgVariable(tx, r, GetItemSource(saved_src, k)) for k, r in enumerate(v.saved)]
        return b.cycle_of(None if v.it is None else part(v.it, AttrSource(src, "it")), saved, v.pos)
    active = [i is not None for i in v.its]
    e = f"[i is not None for i in {src.expr()}.its] == {active!r}"
    g.add(e, e)
    its_src = AttrSource(src, "its")
    its = [part(i, GetItemSource(its_src, k)) if i is not None else None for k, i in enumerate(v.its)]
    return b._zip_longest_lazy(its, wrap(tx, v.fill, AttrSource(src, "fill")), active)


def _wrap_resume_arg(tx, v, src, name, seen):
    """Arguments of a resume function: what the graph break left on the stack and in locals.
    Besides ordinary values these are loop iterators, the exits of open grad-mode blocks and
    ``.item()``-like floats (see ``UnspecFloatVariable``)."""
    from .output_graph import UnspecFloatVariable
    from .variables.ctx import AutocastExit, AutocastExitVariable, GradModeExit, GradModeExitVariable
    prev = seen.get(id(v))
    from .variables.resumable_iters import RESUMABLE
    if prev is not None and type(v) in _MODELLED_ITERS + RESUMABLE + (enumerate, zip, GradModeExit, AutocastExit):
        tx.output.guards.add(f"{src.expr()} is {prev[1].expr()}", "same iterator")
        return prev[0]
    if _modelled_iterator(v):
        res = _wrap_iterator_arg(tx, v, src)
    elif type(v) is GradModeExit:
        g = tx.output.guards
        g.type_match(src, v)
        g.add(f"{src.expr()}.prev is {v.prev!r}", f"{src.expr()} restores grad mode {v.prev}")
        res = GradModeExitVariable(v.prev, src)
        if tx.output.exc_grad_mode is None:
            tx.output.exc_grad_mode = v.prev   # the outermost open block
    elif type(v) is AutocastExit:
        g = tx.output.guards
        g.type_match(src, v)
        g.add(f"{src.expr()}.prev == {g.ref(v.prev)}", f"{src.expr()} restores autocast regions {v.prev}")
        res = AutocastExitVariable(v.prev, src)
        tx.output.uses_autocast = True
        if tx.output.exc_autocast is _NO_REGIONS:
            tx.output.exc_autocast = v.prev    # the outermost open block
    elif type(v) in (float, int):
        res = UnspecFloatVariable(v, src, tx.output, name)
    elif type(v) is types.FunctionType and v.__name__ not in func_globals(tx) and not _special_function(v):
        res = _wrap_function_by_code(tx, v, src)
    else:
        return LazyArgVariable(tx, v, src)
    seen[id(v)] = (res, src)
    return res


def func_globals(tx):
    return tx.f_globals


def _special_function(v):
    """A function wrap() does not simply inline: one of ember's (``ember.cat``, an operator's
    entry point: recorded as a graph node) or one an ember decorator marked (``@no_grad()``,
    ``ember.compile``, ``compiler.disable`` ...). Passed to a resume function (``ember.cat`` on
    the stack under a break in its arguments) it is wrapped as wrap() does, by identity."""
    from .variables.builder import is_ember_function
    return is_ember_function(v) or any(k.startswith("_ember_") for k in getattr(v, "__dict__", ()))


def _wrap_held(tx, v, src):
    """A function an iterator handed on by a break holds (``takewhile``'s predicate): an inner
    function by its code (the break rebuilt it: a new object every call), anything else as
    ``wrap`` does."""
    if type(v) is types.FunctionType and v.__name__ not in func_globals(tx) and not _special_function(v):
        return _wrap_function_by_code(tx, v, src)
    return wrap(tx, v, src)


def _wrap_function_by_code(tx, v, src):
    """An inner function rebuilt at a graph break is a new object every call: guard its code
    and globals, not its identity (its defaults and closure contents are read, and guarded,
    through the source)."""
    from .variables.functions import UserFunctionVariable
    g = tx.output.guards
    g.type_match(src, v)
    g.add(f"{src.expr()}.__code__ is {g.ref(v.__code__)}", f"{src.expr()} has code {v.__code__.co_name}")
    g.add(f"{src.expr()}.__globals__ is {g.ref(v.__globals__)}", f"{src.expr()}.__globals__ unchanged")
    return UserFunctionVariable(v, src)


class _ExprSource(GlobalSource):
    """A float computed from unspecialized floats: a Python expression over the frame's args."""

    def __init__(self, expr):
        super().__init__("F")
        self._expr = expr

    def expr(self):
        return self._expr

    def name(self):
        return "F"


def _float_arith(tx, sym, a, b):
    """``a + b``, ``a - b``, ``a * b`` (and ``/`` by a non-zero constant) where one side is an
    unspecialized float and the other one too or a number constant: the result is unspecialized
    as well, its source the expression (evaluated where it is used: graph input, guard,
    reconstruction), so ``total += loss.item()`` does not specialise on every value. These
    operators cannot raise on floats, so computing them outside the frame changes nothing."""
    from .output_graph import UnspecFloatVariable
    if not (isinstance(a, UnspecFloatVariable) or isinstance(b, UnspecFloatVariable)):
        return None
    base = sym.rstrip("=") if sym not in ("==", "!=", "<=", ">=") else sym
    if base not in ("+", "-", "*", "/"):
        return None
    parts = []
    for v in (a, b):
        if isinstance(v, UnspecFloatVariable):
            parts.append((v.raw, v.source.expr()))
        elif type(v) is ConstantVariable and type(v.value) in (int, float):
            c = v.value
            if type(c) is float and (c != c or c in (float("inf"), float("-inf"))):
                return None
            parts.append((c, repr(c)))
        else:
            return None
    if base == "/" and (isinstance(b, UnspecFloatVariable) or parts[1][0] == 0):
        return None
    val = _BINARY[base](parts[0][0], parts[1][0])
    from .variables.random_calls import is_random_value, random_value_variable
    src = _ExprSource(f"({parts[0][1]} {base} {parts[1][1]})")
    if is_random_value(a) or is_random_value(b):
        if type(val) not in (int, float):
            return None
        return random_value_variable(val, src, tx.output, "F")
    if type(val) is not float:
        return None
    return UnspecFloatVariable(val, src, tx.output, "F")


def _compare_unspec(tx, op, a, b):
    """``lr > 0.1`` with an unspecialized number: the branch is decided for this call and the
    guard is the comparison's outcome, not the number's value (which would compile again for
    every new value)."""
    from .output_graph import UnspecFloatVariable
    from .variables.random_calls import is_random_value
    if not (isinstance(a, UnspecFloatVariable) and not a._guarded) and \
            not (isinstance(b, UnspecFloatVariable) and not b._guarded):
        return None
    drawn = is_random_value(a) or is_random_value(b)
    sides = []
    for v in (a, b):
        if isinstance(v, UnspecFloatVariable) and not v._guarded:
            sides.append((v.raw, v.source.expr()))
        elif type(v) is ConstantVariable and type(v.value) in (int, float) and v.value == v.value:
            sides.append((v.value, repr(v.value)))
        else:
            return None
    res = bool(_COMPARE[op](sides[0][0], sides[1][0]))
    expr = f"({sides[0][1]}) {op} ({sides[1][1]})"
    if drawn:
        # ``random.random() < p``: known only when the compiled code has drawn the number, after
        # the guards. The outcome is a drawn value too: a branch on it is a graph break at the
        # jump, decided by this expression after the graph (as torch, which breaks at the draw)
        from .variables.random_calls import random_value_variable
        return random_value_variable(res, _ExprSource(f"({expr})"), tx.output, "B")
    tx.output.guards.add(f"({expr}) is {res}", f"{expr} is {res}")
    return ConstantVariable(res)


class LazyArgVariable(VariableTracker):
    """A resume function's argument not read yet: wrapped (and guarded) on first read, and
    passed on through its source if the trace never reads it (a loop variable about to be
    overwritten must not specialise the resume function)."""

    def __init__(self, tx, value, source):
        self.tx, self.value, self.source = tx, value, source

    def realize(self):
        return wrap(self.tx, self.value, self.source)

    def reconstruct(self, out):
        return self.source.expr()

    def __repr__(self):
        return f"LazyArgVariable({self.source.expr()})"


__all__ = ["InstructionTranslator", "run_frame", "BuiltinVariable"]


