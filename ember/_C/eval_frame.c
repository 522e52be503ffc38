/*
 * ember._C._eval_frame: the PEP 523 frame hook behind ember.dynamo.
 *
 * Design (kept deliberately small; see ember/dynamo/eval_frame.py):
 *
 *   set_eval_frame(callback_or_None) -> previous callback (or None)
 *
 * installs our eval-frame function for the whole interpreter while at least
 * one thread has a callback, and uninstalls it when none has.  The callback
 * is per thread (Py_tss), so other threads run at full speed.
 *
 * For every *fresh* frame of a function (CO_OPTIMIZED, not a generator or
 * coroutine, not a throw into one, code not marked "skip") the hook calls
 *
 *     callback(code, func, *argslots)          # argslots = bound arguments
 *
 * with the hook disabled for this thread while the callback runs
 * (re-entrancy: whatever the callback executes runs normally).  The
 * callback returns
 *   - None: the frame runs normally (nested frames are still hooked);
 *   - a callable fn: the hook calls fn(func, *argslots) with the hook still
 *     enabled (so functions it calls, e.g. resume functions, are captured),
 *     and the frame's result is fn's result.
 *
 * "argslots" are the frame's first co_argcount + co_kwonlyargcount
 * (+1 for *args, +1 for **kwargs) fast locals, exactly as CPython bound them
 * (defaults applied).  At this point no instruction has run, so arguments
 * that are also cell variables are still plain values (MAKE_CELL has not
 * run) and free variables are in func.__closure__.
 *
 * Why a callable and not a transformed code object run in a new frame (as
 * torch does): creating and tearing down an _PyInterpreterFrame needs
 * CPython internals that are not exported (and differ in 3.11/3.12/3.13).
 * Instead the original frame is finished with a tiny stub code object swapped
 * into it (see finish_with_stub): the default evaluator then runs the stub
 * and clears/pops the frame exactly as it would any frame, in every version.
 *
 * mark_skip(code) / is_skipped(code) keep a per-code "never call the
 * callback" flag in co_extra, so library frames cost one pointer load.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "ember._C._eval_frame supports CPython 3.11, 3.12 and 3.13"
#endif

#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

#if PY_VERSION_HEX >= 0x030D0000
#define FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#define FRAME_FUNC(f) ((PyObject *)(f)->f_funcobj)
#elif PY_VERSION_HEX >= 0x030C0000
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((PyObject *)(f)->f_funcobj)
#else
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((PyObject *)(f)->f_func)
#endif

#define SKIP_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)
#define SMALL_ARGS 16

static Py_tss_t callback_key = Py_tss_NEEDS_INIT;
static Py_ssize_t extra_index = -1;
static int active_threads = 0;      /* threads with a callback set */
static PyObject *skip_marker;       /* value stored in co_extra for "skip" */
static PyObject *return_stub;       /* code of: def _(r): return r */
static PyObject *raise_stub;        /* code of: def _(e): raise e */
static PyObject *stub_cache;        /* {(kind, nlocalsplus): stub code} */
static unsigned long long n_callback_calls = 0;

/*
 * The stub must have as many fast locals as the frame it finishes: if a frame
 * object is ever made for the frame (a traceback through the raise stub,
 * sys._getframe in a tracer), CPython sizes it from the *stub's* code and
 * copies frame->stacktop (= the original co_nlocalsplus) slots into it.
 * With equal counts the stub's stack base is also the original's, and the
 * stub's one stack slot fits the original's co_stacksize >= 1.
 */
static PyObject *
stub_for(PyObject *base, int kind, int nlocalsplus)
{
    PyObject *key = Py_BuildValue("(ii)", kind, nlocalsplus);
    if (key == NULL) return NULL;
    PyObject *stub = PyDict_GetItemWithError(stub_cache, key);   /* borrowed */
    if (stub != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return stub;
    }
    PyObject *names = PyTuple_New(nlocalsplus);
    if (names == NULL) { Py_DECREF(key); return NULL; }
    PyTuple_SET_ITEM(names, 0, PyUnicode_FromString(kind ? "e" : "r"));
    for (int i = 1; i < nlocalsplus; i++) {
        PyObject *n = PyUnicode_FromFormat("_ember_slot%d", i);
        if (n == NULL) { Py_DECREF(names); Py_DECREF(key); return NULL; }
        PyTuple_SET_ITEM(names, i, n);
    }
    PyObject *replace = PyObject_GetAttrString(base, "replace");
    PyObject *kwargs = Py_BuildValue("{s:O,s:i}", "co_varnames", names, "co_nlocals", nlocalsplus);
    PyObject *empty = PyTuple_New(0);
    stub = (replace && kwargs && empty) ? PyObject_Call(replace, empty, kwargs) : NULL;
    Py_XDECREF(replace);
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    Py_DECREF(names);
    if (stub == NULL || PyDict_SetItem(stub_cache, key, stub) < 0) {
        Py_XDECREF(stub);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(stub);   /* the cache keeps it alive */
    Py_DECREF(key);
    return stub;
}

static PyObject *
get_callback(void)
{
    return (PyObject *)PyThread_tss_get(&callback_key);
}

static int
code_is_skipped(PyCodeObject *code)
{
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return 0;
    }
    return extra == (void *)skip_marker;
}

/*
 * The raise stub re-raises what the compiled code raised; its own traceback entry
 * (File "<string>", line 2, in __ember_raise_stub) says nothing to the user, whose lines
 * the compiled code's entries already name (ember/dynamo/user_line.py): drop it.
 */
static int
tb_starts_in(PyObject *tb, PyObject *code)
{
    if (tb == NULL || !PyTraceBack_Check(tb)) return 0;
    PyFrameObject *f = ((PyTracebackObject *)tb)->tb_frame;
    if (f == NULL) return 0;
    PyCodeObject *fcode = PyFrame_GetCode(f);          /* new reference */
    int hit = (PyObject *)fcode == code;
    Py_XDECREF(fcode);
    return hit;
}

static void
drop_stub_traceback_entry(PyObject *stub_code)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    if (exc == NULL) return;
    PyObject *tb = PyException_GetTraceback(exc);      /* new reference or NULL */
    if (tb_starts_in(tb, stub_code)) {
        PyObject *next = (PyObject *)((PyTracebackObject *)tb)->tb_next;
        PyException_SetTraceback(exc, next ? next : Py_None);
    }
    Py_XDECREF(tb);
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb_starts_in(tb, stub_code)) {
        PyObject *next = (PyObject *)((PyTracebackObject *)tb)->tb_next;
        Py_XINCREF(next);
        Py_DECREF(tb);
        tb = next;
        PyException_SetTraceback(exc, tb ? tb : Py_None);
    }
    PyErr_Restore(type, exc, tb);
#endif
}

/*
 * Finish `frame` without running its code: put `value` in local 0 (the
 * previous occupant is released) and swap in a stub whose whole body is
 * `return local0` or `raise local0`.  The default evaluator runs it and then
 * clears the frame: locals up to frame->stacktop (the original
 * co_nlocalsplus, set when the frame was initialised) are released, and the
 * stub's single stack slot lies in the original frame's own stack area (we
 * only come here when co_nlocalsplus >= 1 and co_stacksize >= 1).
 */
static PyObject *
finish_with_stub(PyThreadState *tstate, _PyInterpreterFrame *frame,
                 PyObject *value, PyObject *base_stub)
{
    int kind = base_stub == raise_stub;
    PyObject *stub_code = stub_for(base_stub, kind, FRAME_CODE(frame)->co_nlocalsplus);
    if (stub_code == NULL) {
        /* Out of memory making a stub: fall back to the generic stub (locals count mismatch
           only matters if a frame object is made for this frame). */
        PyErr_Clear();
        stub_code = base_stub;
    }
    PyObject *old = frame->localsplus[0];
    frame->localsplus[0] = value;      /* steals the reference */
    Py_XDECREF(old);
    PyCodeObject *stub = (PyCodeObject *)stub_code;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *old_code = frame->f_executable;
    frame->f_executable = Py_NewRef(stub_code);
    frame->instr_ptr = _PyCode_CODE(stub);
#else
    PyObject *old_code = (PyObject *)frame->f_code;
    frame->f_code = (PyCodeObject *)Py_NewRef(stub_code);
    frame->prev_instr = _PyCode_CODE(stub) - 1;
#endif
    Py_DECREF(old_code);
    PyObject *res = _PyEval_EvalFrameDefault(tstate, frame, 0);
    if (res == NULL && kind) drop_stub_traceback_entry(stub_code);
    return res;
}

static PyObject *
ember_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throw_flag)
{
    PyObject *callback = get_callback();
    if (callback == NULL || throw_flag) {
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    PyCodeObject *code = FRAME_CODE(frame);
    PyObject *func = FRAME_FUNC(frame);
    if (!(code->co_flags & CO_OPTIMIZED) || (code->co_flags & SKIP_FLAGS) ||
        code->co_nlocalsplus < 1 || code->co_stacksize < 1 ||
        func == NULL || !PyFunction_Check(func) || code_is_skipped(code)) {
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }

    Py_ssize_t nargs = code->co_argcount + code->co_kwonlyargcount +
                       ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                       ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
    PyObject *small[SMALL_ARGS + 2];
    PyObject **argv = small;
    if (nargs + 2 > SMALL_ARGS + 2) {
        argv = PyMem_Malloc(sizeof(PyObject *) * (nargs + 2));
        if (argv == NULL) {
            PyErr_NoMemory();
            return finish_with_stub(tstate, frame, NULL, raise_stub);
        }
    }
    argv[0] = (PyObject *)code;
    argv[1] = func;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *v = frame->localsplus[i];
        argv[2 + i] = v ? v : Py_None;   /* never NULL for bound arguments */
    }

    /* Re-entrancy: the callback and everything it runs see no callback. */
    Py_INCREF(callback);
    PyThread_tss_set(&callback_key, NULL);
    n_callback_calls++;
    PyObject *fn = PyObject_Vectorcall(callback, argv, 2 + nargs, NULL);
    PyThread_tss_set(&callback_key, callback);

    PyObject *result = NULL;
    if (fn == Py_None) {
        Py_DECREF(fn);
        if (argv != small) PyMem_Free(argv);
        Py_DECREF(callback);
        return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
    }
    if (fn != NULL) {
        result = PyObject_Vectorcall(fn, argv + 1, 1 + nargs, NULL);
        Py_DECREF(fn);
    }
    if (argv != small) PyMem_Free(argv);
    Py_DECREF(callback);
    if (result != NULL) {
        return finish_with_stub(tstate, frame, result, return_stub);
    }
    /* Re-raise the pending exception from the stub frame. */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (tb != NULL && val != NULL) PyException_SetTraceback(val, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyObject *exc = val;
#endif
    if (exc == NULL) {
        exc = PyObject_CallFunction(PyExc_SystemError, "s",
                                    "ember eval_frame: error without exception");
    }
    return finish_with_stub(tstate, frame, exc, raise_stub);
}

static PyObject *
set_eval_frame(PyObject *self, PyObject *new_cb)
{
    PyObject *old = get_callback();
    if (new_cb == Py_None) new_cb = NULL;
    if (new_cb != NULL && !PyCallable_Check(new_cb)) {
        PyErr_SetString(PyExc_TypeError, "set_eval_frame expects a callable or None");
        return NULL;
    }
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    if (new_cb != NULL) Py_INCREF(new_cb);
    if (PyThread_tss_set(&callback_key, new_cb) != 0) {
        Py_XDECREF(new_cb);
        PyErr_SetString(PyExc_RuntimeError, "set_eval_frame: cannot set thread-local callback");
        return NULL;
    }
    if (old == NULL && new_cb != NULL) {
        if (active_threads++ == 0)
            _PyInterpreterState_SetEvalFrameFunc(interp, ember_eval_frame);
    } else if (old != NULL && new_cb == NULL) {
        if (--active_threads == 0)
            _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
    if (old == NULL) Py_RETURN_NONE;
    return old;   /* the reference the tss held passes to the caller */
}

static PyObject *
get_eval_frame_callback(PyObject *self, PyObject *unused)
{
    PyObject *cb = get_callback();
    return Py_NewRef(cb ? cb : Py_None);
}

static PyObject *
is_installed(PyObject *self, PyObject *unused)
{
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(interp) == ember_eval_frame);
}

/*
 * Only skip_marker is ever stored under our co_extra index. Some CPython
 * versions release the previous value through our free function inside
 * _PyCode_SetExtra, others do not, so we never release it ourselves: each
 * store takes one reference to the (module-lifetime) marker, and at worst a
 * reference to it is never given back, which is harmless.
 */
static PyObject *
mark_skip(PyObject *self, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "mark_skip expects a code object");
        return NULL;
    }
    void *extra = NULL;
    if (_PyCode_GetExtra(code, extra_index, &extra) < 0) return NULL;
    if (extra == (void *)skip_marker) Py_RETURN_NONE;
    Py_INCREF(skip_marker);
    if (_PyCode_SetExtra(code, extra_index, skip_marker) < 0) {
        Py_DECREF(skip_marker);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
unmark_skip(PyObject *self, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "unmark_skip expects a code object");
        return NULL;
    }
    void *extra = NULL;
    if (_PyCode_GetExtra(code, extra_index, &extra) < 0) return NULL;
    if (extra == NULL) Py_RETURN_NONE;
    if (_PyCode_SetExtra(code, extra_index, NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *
is_skipped(PyObject *self, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "is_skipped expects a code object");
        return NULL;
    }
    return PyBool_FromLong(code_is_skipped((PyCodeObject *)code));
}

static PyObject *
callback_calls(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(n_callback_calls);
}

static void
free_extra(void *extra)
{
    /* Only skip_marker is stored, and it lives as long as the module (see mark_skip). */
    (void)extra;
}

static PyMethodDef methods[] = {
    {"set_eval_frame", set_eval_frame, METH_O,
     "set_eval_frame(callback or None) -> previous callback; installs the hook while any thread has one"},
    {"get_eval_frame_callback", get_eval_frame_callback, METH_NOARGS, "this thread's callback or None"},
    {"is_installed", is_installed, METH_NOARGS, "whether the interpreter's eval-frame function is ours"},
    {"mark_skip", mark_skip, METH_O, "never call the callback for frames of this code object"},
    {"unmark_skip", unmark_skip, METH_O, "undo mark_skip"},
    {"is_skipped", is_skipped, METH_O, "whether mark_skip was called for this code object"},
    {"callback_calls", callback_calls, METH_NOARGS, "how many times the callback was called (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._C._eval_frame",
    "PEP 523 frame hook for ember.dynamo (see eval_frame.c for the protocol).", -1, methods,
};

static PyObject *
compile_stub(const char *src, const char *name)
{
    PyObject *globals = PyDict_New();
    if (globals == NULL) return NULL;
    if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) {
        Py_DECREF(globals);
        return NULL;
    }
    PyObject *res = PyRun_String(src, Py_file_input, globals, globals);
    if (res == NULL) {
        Py_DECREF(globals);
        return NULL;
    }
    Py_DECREF(res);
    PyObject *fn = PyDict_GetItemString(globals, name);   /* borrowed */
    PyObject *code = fn ? PyObject_GetAttrString(fn, "__code__") : NULL;
    Py_DECREF(globals);
    return code;
}

PyMODINIT_FUNC
PyInit__eval_frame(void)
{
    if (PyThread_tss_create(&callback_key) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot create thread-local key");
        return NULL;
    }
    extra_index = _PyEval_RequestCodeExtraIndex(free_extra);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reserve a co_extra index");
        return NULL;
    }
    skip_marker = PyUnicode_InternFromString("ember.skip");
    stub_cache = PyDict_New();
    if (stub_cache == NULL) return NULL;
    return_stub = compile_stub("def __ember_return_stub(r):\n    return r\n", "__ember_return_stub");
    if (return_stub == NULL) return NULL;
    raise_stub = compile_stub("def __ember_raise_stub(e):\n    raise e\n", "__ember_raise_stub");
    if (raise_stub == NULL) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "return_stub_code", return_stub) < 0) return NULL;
    if (PyModule_AddObjectRef(m, "raise_stub_code", raise_stub) < 0) return NULL;
    return m;
}
