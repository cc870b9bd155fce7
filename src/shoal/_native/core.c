/* The runtime's per-message paths, compiled: shoal/_runtime/runtime.py and sending.py
 * are the reference.
 *
 * This file: the Core object (one per runtime) and its counters; the paths are in
 * send.c and receive.c.
 *
 * Send: an entry-method call without a reply, to an element on another PE, is encoded
 * (plain NumPy arrays as a descriptor plus their memory, anything else by shoal's
 * pickler), given its header and sent as one eager frame, without entering Python.
 *
 * Receive: an eager frame that calls an entry method without reply, on an element
 * that is here, becomes the call itself: arrays are rebuilt in fresh memory straight
 * from the receive buffer, other arguments unpickled, the method called; a coroutine
 * it returns goes to the runtime's task driver, an exception to its error handler.
 *
 * The per-PE counters of quiescence detection and the entry-call depth live here, so
 * both paths share them: the Python runtime reads and writes them as `rt.counts`.
 */
#define SHOAL_IMPORTS_NUMPY
#include "core.h"

Core *active = NULL;

Core *core_for(PyObject *rt) {
    return active != NULL && active->rt == rt ? active : NULL;
}

/* The frames' hook: a received eager frame for this core (see native.h). */
static int deliver_hook(void *core, const char *frame, Py_ssize_t n, void *frames) {
    return core_deliver((Core *)core, frame, n, (Frames *)frames);
}

static int Core_init(Core *self, PyObject *args, PyObject *kw) {
    PyObject *frames, *rt, *future_cls, *set_cls;
    if (self->locations) { /* a second __init__ would leak (or drop) what the first one took */
        PyErr_SetString(PyExc_RuntimeError, "shoal._native.Core is already initialised");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOOOOOOO", &FramesType, &frames, &rt, &self->locations, &self->colls,
                          &self->start_task, &self->failed, &self->encode, &self->loads, &self->layouts,
                          &self->layout, &self->slow_send, &future_cls, &set_cls, &self->fut_pending, &self->fut_done))
        return -1;
    /* the parsed references are borrowed: own them at once, so that Core_dealloc may
     * release them whichever check below fails */
    PyObject **refs[] = {&self->locations, &self->colls, &self->start_task, &self->failed, &self->encode,
                         &self->loads, &self->layouts, &self->layout, &self->slow_send, &self->fut_pending,
                         &self->fut_done};
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) Py_INCREF(*refs[i]);
    if (!PyType_Check(set_cls)) {
        PyErr_SetString(PyExc_TypeError, "the receive-set class must be a class");
        return -1;
    }
    Py_INCREF(set_cls);
    Py_XSETREF(self->set_cls, set_cls);
    if (!PyType_Check(future_cls)) {
        PyErr_SetString(PyExc_TypeError, "the future class must be a class");
        return -1;
    }
    Py_INCREF(future_cls);
    Py_XSETREF(self->future_cls, future_cls);
    if (!shoal_contract_ready) {
        PyErr_SetString(PyExc_RuntimeError, "configure_contract() must run before a Core is made (core_contract.py)");
        return -1;
    }
    if (!(self->table = PyObject_GetAttr(rt, shoal_names.future_table))) return -1;
    if (!(self->futures = PyObject_GetAttr(self->table, shoal_names.futures))) return -1;
    if (!PyDict_Check(self->futures)) {
        PyErr_SetString(PyExc_TypeError, "rt.future_table.futures must be a dict");
        return -1;
    }
    PyObject *local = PyObject_GetAttr(rt, shoal_names.local);
    if (!local) return -1;
    self->local = local;
    if (!(self->ready = PyObject_GetAttr(rt, shoal_names.ready))) return -1;
    if (!(self->on_value = PyObject_GetAttr(rt, shoal_names.on_value))) return -1;
    if (!(self->route = PyObject_GetAttr(self->locations, shoal_names.route))) return -1;
    if (!(self->send_future = PyObject_GetAttr(rt, shoal_names.send_future))) return -1;
    if (!(self->replier = PyObject_GetAttr(rt, shoal_names.replier))) return -1;
    self->local_append = PyObject_GetAttr(local, shoal_names.append);
    self->local_popleft = PyObject_GetAttr(local, shoal_names.popleft);
    if (!self->local_append || !self->local_popleft) return -1;
    if (!PyDict_Check(self->colls) || !PyDict_Check(self->layouts)) {
        PyErr_SetString(PyExc_TypeError, "colls and layouts must be dicts");
        return -1;
    }
    Py_INCREF(frames);
    Py_INCREF(rt);
    self->frames = (Frames *)frames;
    self->rt = rt;
    PyObject *pe = PyObject_GetAttr(rt, shoal_names.pe);
    if (!pe) return -1;
    self->pe = (uint32_t)PyLong_AsUnsignedLong(pe);
    Py_DECREF(pe);
    if (PyErr_Occurred()) return -1;
    self->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)self->pe + 1);
    self->comm_countdown = comm_interval(self);
    self->frames->hook = deliver_hook;
    self->frames->hook_owner = self;
    active = self;
    return 0;
}

/* detach(): stop serving (the transport is closing). */
static PyObject *Core_detach(Core *self, PyObject *unused) {
    if (self->frames && self->frames->hook_owner == self) {
        self->frames->hook = NULL;
        self->frames->hook_owner = NULL;
        self->frames->idle_hook = NULL;
    }
    if (active == self) active = NULL;
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *self) {
    Core_detach(self, NULL);
    Py_XDECREF(self->ready);
    Py_XDECREF(self->frames);
    Py_XDECREF(self->rt);
    Py_XDECREF(self->locations);
    Py_XDECREF(self->colls);
    Py_XDECREF(self->start_task);
    Py_XDECREF(self->failed);
    Py_XDECREF(self->encode);
    Py_XDECREF(self->loads);
    Py_XDECREF(self->layouts);
    Py_XDECREF(self->layout);
    Py_XDECREF(self->slow_send);
    Py_XDECREF(self->local_append);
    Py_XDECREF(self->local_popleft);
    Py_XDECREF(self->local);
    Py_XDECREF(self->on_value);
    Py_XDECREF(self->route);
    Py_XDECREF(self->send_future);
    Py_XDECREF(self->replier);
    Py_XDECREF(self->trace);
    Py_XDECREF(self->comm);
    Py_XDECREF(self->set_cls);
    Py_XDECREF(self->future_cls);
    Py_XDECREF(self->futures);
    Py_XDECREF(self->table);
    Py_XDECREF(self->fut_pending);
    Py_XDECREF(self->fut_done);
    exchanges_free(self->exchanges);
    broadcasts_free(self->broadcasts);
    contributions_free(self->contributions);
    trace_runs_free(self->trace_runs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef Core_members[] = {
    {"sent", T_LONGLONG, offsetof(Core, sent), 0, "program messages sent (quiescence detection)"},
    {"received", T_LONGLONG, offsetof(Core, received), 0, "program messages received"},
    {"depth", T_LONGLONG, offsetof(Core, depth), 0, "entry methods running (nested) now"},
    {"calls", T_LONGLONG, offsetof(Core, calls), 0, "entry-method runs begun (with `received`, a mark of the running call)"},
    {"trace", T_OBJECT, offsetof(Core, trace), READONLY, "the tracer's trace_runs(list) (trace_into sets it), or None: off"},
    {"busy", T_DOUBLE, offsetof(Core, busy), 0, "ticks spent in (outermost) entry methods"},
    {"comm", T_OBJECT, offsetof(Core, comm), 0, "comm(el, proxy, nbytes): one send in COMM_SAMPLE from an element"},
    {NULL}
};

/* new_future(back) -> a pending Future registered with the runtime, as Future() made
 * in the Python frame `back` frames above the caller's (Future.__init__ and
 * FutureTable.register are the reference): the future of a ret=True call. */
static PyObject *Core_new_future(Core *self, PyObject *arg) {
    long back = PyLong_AsLong(arg);
    if (back < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "new_future(back): back >= 0");
        return NULL;
    }
    return core_new_future(self, back);
}

PyObject *core_new_future(Core *self, long back) {
    PyObject *next = PyObject_GetAttr(self->table, shoal_names.next_fid);
    if (!next) return NULL;
    unsigned long fid = PyLong_AsUnsignedLong(next);
    if (fid == (unsigned long)-1 && PyErr_Occurred()) { Py_DECREF(next); return NULL; }
    PyObject *following = PyLong_FromUnsignedLong(fid < 0xFFFFFFFFul ? fid + 1 : 1);
    int err = !following || PyObject_SetAttr(self->table, shoal_names.next_fid, following) < 0;
    Py_XDECREF(following);
    if (err) { Py_DECREF(next); return NULL; }
    /* where it was made: (code, line) of the frame `back` above the caller's */
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(frame);
    for (long i = 0; frame && i < back; i++) Py_SETREF(frame, PyFrame_GetBack(frame));
    PyObject *origin;
    if (frame) {
        PyObject *code = (PyObject *)PyFrame_GetCode(frame);
        origin = Py_BuildValue("(Ni)", code, PyFrame_GetLineNumber(frame));
        Py_DECREF(frame);
    } else {
        origin = PyUnicode_FromString("<unknown>");
    }
    PyTypeObject *cls = (PyTypeObject *)self->future_cls;
    PyObject *fut = origin ? cls->tp_alloc(cls, 0) : NULL;
    PyObject *owner = fut ? PyLong_FromUnsignedLong(self->pe) : NULL;
    if (!owner) { Py_XDECREF(fut); Py_XDECREF(origin); Py_DECREF(next); return NULL; }
    SLOT(fut, shoal_slots.future_rt) = Py_NewRef(self->rt);
    SLOT(fut, shoal_slots.future_owner) = owner;
    SLOT(fut, shoal_slots.future_fid) = next; /* the reference taken above */
    future_set_pending(self, fut);
    SLOT(fut, shoal_slots.future_value) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_callbacks) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_origin) = origin;
    if (PyDict_SetItem(self->futures, next, fut) < 0) { Py_DECREF(fut); return NULL; }
    return fut;
}

/* ticks() -> int: the clock that element loads are counted in (see now_ticks). */
static PyObject *Core_ticks(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(now_ticks());
}

static PyMethodDef Core_methods[] = {
    {"ticks", (PyCFunction)Core_ticks, METH_NOARGS, "ticks() -> int: the clock of the compiled paths' element loads"},
    {"new_future", (PyCFunction)Core_new_future, METH_O, "new_future(back) -> a registered pending Future made `back` frames up"},
    {"send_value", (PyCFunction)(void (*)(void))Core_send_value, METH_FASTCALL, "send_value(dest, kind, entry, aux, coll, value) -> bool"},
    {"send", (PyCFunction)(void (*)(void))Core_send, METH_FASTCALL, "send(proxy, entry, aux, *args) -> bool: an entry call whose reply goes to future aux"},
    {"run_each", (PyCFunction)(void (*)(void))Core_run_each, METH_FASTCALL, "run_each(elements, entry, args, kwargs): a broadcast's local calls"},
    {"run_local", (PyCFunction)(void (*)(void))Core_run_local, METH_FASTCALL, "run_local(deliver, deliver_direct) -> messages run"},
    {"channel_send", (PyCFunction)(void (*)(void))Core_channel_send, METH_FASTCALL, "channel_send(channel, fallback) -> the channel's compiled send(*values)"},
    {"channel_recv", (PyCFunction)(void (*)(void))Core_channel_recv, METH_FASTCALL,
     "channel_recv(channel, fallback, future_class) -> the channel's compiled recv(into=None)"},
    {"set_post", (PyCFunction)(void (*)(void))Core_set_post, METH_FASTCALL, "set_post(set, fallback) -> the receive set's compiled post()"},
    {"task_resume", (PyCFunction)(void (*)(void))Core_task_resume, METH_FASTCALL, "task_resume(task, fallback) -> the task's compiled resume()"},
    {"task_wake_now", (PyCFunction)(void (*)(void))Core_task_wake_now, METH_FASTCALL, "task_wake_now(task, fallback) -> the task's compiled wake_now(fut)"},
    {"use_exchanges", (PyCFunction)(void (*)(void))Core_use_exchanges, METH_FASTCALL,
     "use_exchanges(manager, npes, post_value, ResultFuture, Chare, CollectionState, context, reducers, ufuncs): all-reduces compiled"},
    {"exchange", (PyCFunction)(void (*)(void))Core_exchange, METH_FASTCALL, "exchange(coll, seq, value, reducer, fut): start an all-reduce"},
    {"exchange_arrive", (PyCFunction)(void (*)(void))Core_exchange_arrive, METH_FASTCALL, "exchange_arrive(coll, seq, round, value)"},
    {"exchange_forget", (PyCFunction)Core_exchange_forget, METH_O, "exchange_forget(coll): drop a destroyed collection's all-reduces"},
    {"exchanges_under_way", (PyCFunction)Core_exchanges_under_way, METH_NOARGS, "exchanges_under_way() -> [(coll, seq, started, stage)]"},
    {"allreduce", (PyCFunction)(void (*)(void))Core_allreduce, METH_FASTCALL, "allreduce(el, value, reducer) -> Future, or None: not a compiled case"},
    {"use_broadcasts", (PyCFunction)(void (*)(void))Core_use_broadcasts, METH_FASTCALL,
     "use_broadcasts(manager, tree_from, holding, Block, PENDING, partials): broadcasts compiled"},
    {"gathers_forget", (PyCFunction)Core_gathers_forget, METH_O, "gathers_forget(coll): drop a destroyed collection's gathers"},
    {"gather_offer", (PyCFunction)(void (*)(void))Core_gather_offer, METH_FASTCALL,
     "gather_offer(coll, fid, src, first, values) -> bool: a reply that came the Python way, if the core's"},
    {"gathers_under_way", (PyCFunction)Core_gathers_under_way, METH_NOARGS, "gathers_under_way() -> [(coll, src, fid, got, expected)]"},
    {"use_contributions", (PyCFunction)(void (*)(void))Core_use_contributions, METH_FASTCALL,
     "use_contributions(manager, check_target, EntryRef, context, Chare, future_handle): contributions to reductions compiled"},
    {"contribute", (PyCFunction)(void (*)(void))Core_contribute, METH_FASTCALL,
     "contribute(el, value, reducer, target) -> bool: taken, or not a compiled case"},
    {"contribution_offer", (PyCFunction)(void (*)(void))Core_contribution_offer, METH_FASTCALL,
     "contribution_offer(src, coll, seq, reducer, target, value) -> bool: a child's partial, taken if the core gathers it"},
    {"contributions_release", (PyCFunction)Core_contributions_release, METH_O,
     "contributions_release(coll): hand a collection's contributions here to the manager (an element moved)"},
    {"contributions_forget", (PyCFunction)Core_contributions_forget, METH_O, "contributions_forget(coll): drop a destroyed collection's"},
    {"contributions_under_way", (PyCFunction)Core_contributions_under_way, METH_NOARGS,
     "contributions_under_way() -> [(coll, seq, got, reducer, target)]"},
    {"trace_into", (PyCFunction)(void (*)(void))Core_trace_into, METH_FASTCALL,
     "trace_into(tracer, origin, width): keep the entry methods' runs for tracer(list), in bins of width ticks (0: each)"},
    {"trace_flush", (PyCFunction)Core_trace_flush, METH_NOARGS, "trace_flush(): the runs kept, to the tracer now"},
    {"detach", (PyCFunction)Core_detach, METH_NOARGS, "stop serving the runtime"},
    {NULL}
};

PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A runtime's compiled per-message paths and counters.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
    .tp_members = Core_members,
};

/* Compiled: see compiled_method in core.h. */
typedef struct {
    PyObject_HEAD
    Core *core;
    PyObject *obj;
    PyObject *fallback;
    fastfunc fast;          /* a method that returns None; or NULL, and then: */
    valuefunc fast_value;   /* a method that returns a value (keywords too) */
    PyObject *extra;        /* fast_value's own argument */
    vectorcallfunc vectorcall;
} Compiled;

static PyObject *compiled_call(Compiled *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), n = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (self->fast == NULL) {
        if (active == self->core) {
            PyObject *r = self->fast_value(self->core, self->obj, self->extra, args, nargs, kwnames);
            if (r || PyErr_Occurred()) return r;
        }
    } else if (kwnames == NULL && active == self->core) {
        int r = self->fast(self->core, self->obj, args, nargs);
        if (r < 0) return NULL;
        if (r) Py_RETURN_NONE;
    }
    /* fallback(obj, *args, **kwargs): `obj` in front of the arguments */
    PyObject *small[MAX_ARGS + 2], **vec = n <= MAX_ARGS ? small : PyMem_Malloc((n + 2) * sizeof(PyObject *));
    if (!vec) return PyErr_NoMemory();
    vec[1] = self->obj;
    for (Py_ssize_t i = 0; i < n; i++) vec[i + 2] = args[i];
    PyObject *r = PyObject_Vectorcall(self->fallback, vec + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    if (vec != small) PyMem_Free(vec);
    return r;
}

static int Compiled_traverse(Compiled *self, visitproc visit, void *arg) {
    Py_VISIT(self->obj);
    Py_VISIT(self->fallback);
    Py_VISIT(self->extra);
    return 0;
}

static int Compiled_clear(Compiled *self) {
    Py_CLEAR(self->obj);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->extra);
    return 0;
}

static void Compiled_dealloc(Compiled *self) {
    PyObject_GC_UnTrack(self);
    Compiled_clear(self);
    Py_XDECREF(self->core);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject CompiledType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Compiled",
    .tp_basicsize = sizeof(Compiled),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A runtime object's method (a channel's send and recv, a receive set's post), compiled.",
    .tp_vectorcall_offset = offsetof(Compiled, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)Compiled_traverse,
    .tp_clear = (inquiry)Compiled_clear,
    .tp_dealloc = (destructor)Compiled_dealloc,
};

static PyObject *compiled_new(Core *c, PyObject *obj, PyObject *fallback, fastfunc fast, valuefunc fast_value,
                              PyObject *extra) {
    Compiled *self = PyObject_GC_New(Compiled, &CompiledType);
    if (!self) return NULL;
    self->core = (Core *)Py_NewRef((PyObject *)c);
    self->obj = Py_NewRef(obj);
    self->fallback = Py_NewRef(fallback);
    self->fast = fast;
    self->fast_value = fast_value;
    self->extra = Py_XNewRef(extra);
    self->vectorcall = (vectorcallfunc)compiled_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

PyObject *compiled_method(Core *c, PyObject *obj, PyObject *fallback, fastfunc fast) {
    return compiled_new(c, obj, fallback, fast, NULL, NULL);
}

PyObject *compiled_value_method(Core *c, PyObject *obj, PyObject *fallback, valuefunc fast, PyObject *extra) {
    return compiled_new(c, obj, fallback, NULL, fast, extra);
}

/* Load: load[i] and load[i] = x for i in 0, 1; load[:] = x sets both. */
static Py_ssize_t load_slot(PyObject *key) {
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < 0) i += 2;
    if (i < 0 || i > 1) {
        PyErr_SetString(PyExc_IndexError, "a load has two counters, 0 and 1");
        return -1;
    }
    return i;
}

static Py_ssize_t Load_length(PyObject *self) { return 2; }

static PyObject *Load_item(Load *self, PyObject *key) {
    Py_ssize_t i = load_slot(key);
    return i < 0 ? NULL : PyFloat_FromDouble(self->v[i]);
}

static int Load_set(Load *self, PyObject *key, PyObject *value) {
    double x = value ? PyFloat_AsDouble(value) : -1.0;
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "a load's counters cannot be deleted");
        return -1;
    }
    if (x == -1.0 && PyErr_Occurred()) return -1;
    if (PySlice_Check(key)) {
        self->v[0] = self->v[1] = x;
        return 0;
    }
    Py_ssize_t i = load_slot(key);
    if (i < 0) return -1;
    self->v[i] = x;
    return 0;
}

static PyObject *Load_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Load() takes no arguments");
        return NULL;
    }
    Load *self = (Load *)type->tp_alloc(type, 0);
    if (self) self->v[0] = self->v[1] = 0.0;
    return (PyObject *)self;
}

static PyObject *Load_repr(Load *self) {
    PyObject *a = PyFloat_FromDouble(self->v[0]), *b = PyFloat_FromDouble(self->v[1]);
    PyObject *r = a && b ? PyUnicode_FromFormat("Load(%R, %R)", a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

/* pickle: loads are measurements of this run, so a copy starts from zero
 * (shoal.native.fresh_load: this module is found by path, not by its type's name) */
static PyObject *Load_reduce(PyObject *self, PyObject *unused) {
    PyObject *mod = PyImport_ImportModule("shoal.native");
    PyObject *fn = mod ? PyObject_GetAttrString(mod, "fresh_load") : NULL;
    Py_XDECREF(mod);
    return fn ? Py_BuildValue("(N())", fn) : NULL;
}

static PyMethodDef Load_methods[] = {
    {"__reduce__", Load_reduce, METH_NOARGS, "a pickled load is a fresh one"},
    {NULL}
};

static PyMappingMethods Load_mapping = {
    .mp_length = Load_length,
    .mp_subscript = (binaryfunc)Load_item,
    .mp_ass_subscript = (objobjargproc)Load_set,
};

PyTypeObject LoadType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Load",
    .tp_basicsize = sizeof(Load),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element's load counters: [0] seconds (Python paths), [1] clock ticks (compiled paths).",
    .tp_new = Load_new,
    .tp_repr = (reprfunc)Load_repr,
    .tp_as_mapping = &Load_mapping,
    .tp_methods = Load_methods,
};

static PyObject *numpy_name; /* "numpy": its key in sys.modules */

/* Load NumPy's C API if this process has imported NumPy (numpy_api_ready, core.h): 1
 * loaded, 0 not: NumPy is not imported yet, or its C API did not load, and arrays then
 * take the Python path, which uses NumPy's Python API. */
int numpy_api_load(void) {
    PyObject *numpy = PyDict_GetItemWithError(PyImport_GetModuleDict(), numpy_name);
    if (!numpy || _import_array() < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static PyMethodDef core_functions[] = {
    {"contribute_method", (PyCFunction)(void (*)(void))Core_contribute_method, METH_FASTCALL,
     "contribute_method(Chare, fallback) -> the compiled Chare.contribute (fallback: the Python method)"},
    {"describe", (PyCFunction)(void (*)(void))Core_describe, METH_FASTCALL, "describe(*arrays) -> the ARRAYS descriptor the compiled path sends"},
    {"pickle_simple", (PyCFunction)(void (*)(void))Core_pickle_simple, METH_FASTCALL, "pickle_simple(args) -> the pickle of a tuple of None, bools, floats and 64-bit ints, else None"},
    {"unpickle_simple", (PyCFunction)(void (*)(void))Core_unpickle_simple, METH_FASTCALL, "unpickle_simple(data) -> the tuple pickle_simple pickled, else None"},
    {NULL}
};

int core_init(PyObject *m) {
    if (!numpy_name && !(numpy_name = PyUnicode_FromString("numpy"))) return -1;
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&CompiledType) < 0 || PyType_Ready(&LoadType) < 0) return -1;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) { Py_DECREF(&CoreType); return -1; }
    Py_INCREF(&LoadType);
    if (PyModule_AddObject(m, "Load", (PyObject *)&LoadType) < 0) { Py_DECREF(&LoadType); return -1; }
    return PyModule_AddFunctions(m, core_functions);
}

