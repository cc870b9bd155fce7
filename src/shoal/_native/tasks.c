/* Coroutine steps, compiled (reference: Task.step and Task._wake_now in
 * shoal/_runtime/futures.py): resuming an `async` entry method or main where it awaited,
 * and parking it on the next future it awaits. A task whose element keeps load counters
 * (timed steps), a step with an exception to throw in, or a wake-up inside an entry
 * method goes to the Python path. */
#include "core.h"

static int configured = 0; /* configure_tasks() ran: the compiled steps may run */
static PyObject *future_cls;
/* for `await future`: the states, Future.__await__ (the Python path) and
 * shoal._runtime.context's namespace (`_current`: the running runtime) */
static PyObject *f_pending, *f_done, *await_python, *context_ns;

/* Whether the compiled step takes `task`: the classes are configured, its slots are set
 * and its element keeps no load counters (a timed step is Task.step's). */
static int steppable(PyObject *task) {
    return configured && SLOT(task, shoal_slots.task_rt) && SLOT(task, shoal_slots.task_coro) && SLOT(task, shoal_slots.task_element) && SLOT(task, shoal_slots.task_load) == Py_None;
}

/* One step of a steppable `task`'s coroutine: 1 done; -1 error. */
static int task_step(Core *c, PyObject *task) {
    PyObject *rt = SLOT(task, shoal_slots.task_rt), *coro = SLOT(task, shoal_slots.task_coro), *element = SLOT(task, shoal_slots.task_element);
    Py_INCREF(task); /* the step may drop the last other reference to it */
    c->depth++;
    /* rt.current_element = element for the step, then back to the caller (a slot; NULL: unset) */
    PyObject **current = &SLOT(rt, shoal_slots.rt_current_element);
    PyObject *caller = *current;
    *current = Py_NewRef(element);
    PyObject *result = NULL, *type = NULL, *value = NULL, *tb = NULL;
    PySendResult sent = PyIter_Send(coro, Py_None, &result);
    if (sent == PYGEN_ERROR) PyErr_Fetch(&type, &value, &tb);
    Py_XSETREF(*current, caller);
    c->depth--;
    int r = 0;
    if (sent == PYGEN_RETURN) { /* finished: on_done(value, None) */
        PyObject *res = PyObject_CallFunctionObjArgs(SLOT(task, shoal_slots.task_on_done), result, Py_None, NULL);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    if (sent == PYGEN_ERROR) { /* raised: on_done(None, exc), as `except BaseException` does */
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        PyObject *res = PyObject_CallFunctionObjArgs(SLOT(task, shoal_slots.task_on_done), Py_None, value, NULL);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    /* suspended on `result` */
    if (!PyObject_TypeCheck(result, (PyTypeObject *)future_cls)) { /* Task._refuse names it */
        PyObject *res = PyObject_CallMethodOneArg(task, shoal_names.refuse, result);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    Py_XSETREF(SLOT(task, shoal_slots.task_waiting), Py_NewRef(result));
    PyObject *suspended = SLOT(rt, shoal_slots.rt_suspended);
    if (!suspended || PySet_Add(suspended, task) < 0) {
        if (!suspended) PyErr_SetString(PyExc_SystemError, "a runtime without its suspended tasks");
        r = -1;
        goto out;
    }
    PyObject *now = PyObject_GetAttr(result, shoal_names.resume_now);
    int resume_now = now ? PyObject_IsTrue(now) : -1;
    Py_XDECREF(now);
    if (resume_now < 0) { r = -1; goto out; }
    PyObject *wake = SLOT(task, resume_now ? shoal_slots.task_wake_now : shoal_slots.task_wake);
    if (!wake) { PyErr_SetString(PyExc_SystemError, "a task without its wake-up"); r = -1; goto out; }
    int pending = future_pending(c, result);
    if (pending < 0) { r = -1; goto out; }
    if (pending && SLOT(result, shoal_slots.future_callbacks) == Py_None) {
        PyObject *callbacks = PyList_New(1); /* add_done_callback, inlined */
        if (!callbacks) { r = -1; goto out; }
        PyList_SET_ITEM(callbacks, 0, Py_NewRef(wake));
        Py_XSETREF(SLOT(result, shoal_slots.future_callbacks), callbacks);
    } else {
        PyObject *res = PyObject_CallMethodOneArg(result, shoal_names.add_done_callback, wake);
        if (!res) { r = -1; goto out; }
        Py_DECREF(res);
    }
    r = 1;
out:
    Py_XDECREF(result);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    Py_DECREF(task);
    return r;
}

/* task.resume(): its next step (Task.step with no exception to throw). */
static int resume_fast(Core *c, PyObject *task, PyObject *const *args, Py_ssize_t nargs) {
    return nargs <= 1 && steppable(task) ? task_step(c, task) : 0;
}

/* task.wake_now(fut): the future it awaited resolved outside any entry method: resume
 * it there and then (Task._wake_now); inside one, the Python path queues it instead. */
static int wake_now_fast(Core *c, PyObject *task, PyObject *const *args, Py_ssize_t nargs) {
    if (c->depth || !steppable(task)) return 0;
    Py_XSETREF(SLOT(task, shoal_slots.task_waiting), Py_NewRef(Py_None));
    PyObject *suspended = SLOT(SLOT(task, shoal_slots.task_rt), shoal_slots.rt_suspended);
    if (!suspended) { PyErr_SetString(PyExc_SystemError, "a runtime without its suspended tasks"); return -1; }
    if (PySet_Discard(suspended, task) < 0) return -1;
    return task_step(c, task);
}

PyObject *Core_task_resume(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "task_resume(task, fallback)"); return NULL; }
    return compiled_method(self, args[0], args[1], resume_fast);
}

PyObject *Core_task_wake_now(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "task_wake_now(task, fallback)"); return NULL; }
    return compiled_method(self, args[0], args[1], wake_now_fast);
}

/* `await future`, compiled (Future.__await__ is the reference): an iterator that yields
 * the future once if it is pending, then returns its value (or raises its error through
 * Future.result). */
typedef struct {
    PyObject_HEAD
    PyObject *fut;
    int yielded;
} Awaiting;

/* One step (the coroutine sends None, or anything: the future ignores it): PYGEN_NEXT
 * with the future to wait for, PYGEN_RETURN with its value, or PYGEN_ERROR. A coroutine
 * awaiting it steps it this way (am_send), with no StopIteration to make. */
static PySendResult awaiting_send(Awaiting *self, PyObject *arg, PyObject **result) {
    PyObject *fut = self->fut;
    if (!fut) { /* exhausted */
        *result = Py_NewRef(Py_None);
        return PYGEN_RETURN;
    }
    PyObject *state = SLOT(fut, shoal_slots.future_state);
    if (!self->yielded && state == f_pending) {
        self->yielded = 1;
        *result = Py_NewRef(fut);
        return PYGEN_NEXT;
    }
    self->fut = NULL; /* the reference goes with the value */
    *result = state == f_done ? Py_NewRef(SLOT(fut, shoal_slots.future_value)) : PyObject_CallMethodNoArgs(fut, shoal_names.result);
    Py_DECREF(fut);
    return *result ? PYGEN_RETURN : PYGEN_ERROR;
}

/* next(): the same, the value raised as StopIteration */
static PyObject *awaiting_next(Awaiting *self) {
    PyObject *value;
    PySendResult r = awaiting_send(self, Py_None, &value);
    if (r != PYGEN_RETURN) return r == PYGEN_NEXT ? value : NULL;
    if (value != Py_None) { /* return value: StopIteration(value), made so a tuple stays one value */
        PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, value);
        if (stop) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
    }
    Py_DECREF(value);
    return NULL;
}

static int awaiting_traverse(Awaiting *self, visitproc visit, void *arg) {
    Py_VISIT(self->fut);
    return 0;
}

static int awaiting_clear(Awaiting *self) {
    Py_CLEAR(self->fut);
    return 0;
}

static void awaiting_dealloc(Awaiting *self) {
    PyObject_GC_UnTrack(self);
    awaiting_clear(self);
    PyObject_GC_Del(self);
}

static PyAsyncMethods awaiting_async = {.am_send = (sendfunc)awaiting_send};

static PyTypeObject AwaitingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Awaiting",
    .tp_basicsize = sizeof(Awaiting),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "`await future`: yields the future while it is pending, then returns its value.",
    .tp_as_async = &awaiting_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)awaiting_next,
    .tp_traverse = (traverseproc)awaiting_traverse,
    .tp_clear = (inquiry)awaiting_clear,
    .tp_dealloc = (destructor)awaiting_dealloc,
};

/* Future.__await__: a pending future of another runtime (or a handle to another PE's)
 * takes the Python path, which asks for its value or refuses. */
static PyObject *future_await(PyObject *fut, PyObject *unused) {
    if (SLOT(fut, shoal_slots.future_state) == f_pending) {
        PyObject *current = PyDict_GetItemWithError(context_ns, shoal_names.current);
        if (!current && PyErr_Occurred()) return NULL;
        if (SLOT(fut, shoal_slots.future_rt) != current) return PyObject_CallOneArg(await_python, fut);
    }
    Awaiting *it = PyObject_GC_New(Awaiting, &AwaitingType);
    if (!it) return NULL;
    it->fut = Py_NewRef(fut);
    it->yielded = 0;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyMethodDef future_await_def = {"__await__", future_await, METH_NOARGS,
                                       "The compiled `await future` (Future.__await__, compiled)."};

/* configure_tasks(Future, PENDING, DONE, context_namespace): the future states and the
 * running runtime's namespace (the slots are the contract's); Future.__await__ becomes the
 * compiled one (the Python one is kept for the cases it does not take). */
static PyObject *configure_tasks(PyObject *unused, PyObject *args) {
    PyObject *fut_cls, *pending, *done, *ns;
    if (!PyArg_ParseTuple(args, "O!OOO!", &PyType_Type, &fut_cls, &pending, &done, &PyDict_Type, &ns))
        return NULL;
    if (!shoal_contract_ready) {
        PyErr_SetString(PyExc_RuntimeError, "configure_contract() must run before configure_tasks() (core_contract.py)");
        return NULL;
    }
    PyObject *original = PyObject_GetAttrString(fut_cls, "__await__");
    if (!original) return NULL;
    if (Py_IS_TYPE(original, &PyMethodDescr_Type)) { /* configured before: keep the Python one */
        Py_DECREF(original);
    } else {
        Py_XSETREF(await_python, original);
        PyObject *descr = PyDescr_NewMethod((PyTypeObject *)fut_cls, &future_await_def);
        int err = !descr || PyObject_SetAttrString(fut_cls, "__await__", descr) < 0;
        Py_XDECREF(descr);
        if (err) return NULL;
    }
    Py_XSETREF(f_pending, Py_NewRef(pending));
    Py_XSETREF(f_done, Py_NewRef(done));
    Py_XSETREF(context_ns, Py_NewRef(ns));
    Py_INCREF(fut_cls);
    Py_XSETREF(future_cls, fut_cls);
    configured = 1; /* last: the compiled steps run once everything they use is here */
    Py_RETURN_NONE;
}

static PyMethodDef tasks_functions[] = {
    {"configure_tasks", configure_tasks, METH_VARARGS, "configure_tasks(Future, PENDING, DONE, context_namespace)"},
    {NULL}
};

int tasks_init(PyObject *m) {
    if (PyType_Ready(&AwaitingType) < 0) return -1;
    return PyModule_AddFunctions(m, tasks_functions);
}
