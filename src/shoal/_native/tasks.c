/* Coroutine steps, compiled (reference: Task.step and Task._wake_now in
 * shoal/_runtime/futures.py): resuming an `async` entry method or main where it awaited,
 * and parking it on the next future it awaits. A task whose element keeps load counters
 * (timed steps), a step with an exception to throw in, or a wake-up inside an entry
 * method goes to the Python path. */
#include "core.h"

static Py_ssize_t t_rt = -1, t_coro, t_on_done, t_waiting, t_wake, t_wake_now, t_load, t_element;
static PyObject *future_cls, *str_current_element, *str_suspended, *str_resume_now, *str_add_done_callback,
    *str_refuse;

/* Whether the compiled step takes `task`: the classes are configured, its slots are set
 * and its element keeps no load counters (a timed step is Task.step's). */
static int steppable(PyObject *task) {
    return t_rt >= 0 && SLOT(task, t_rt) && SLOT(task, t_coro) && SLOT(task, t_element) && SLOT(task, t_load) == Py_None;
}

/* One step of a steppable `task`'s coroutine: 1 done; -1 error. */
static int task_step(Core *c, PyObject *task) {
    PyObject *rt = SLOT(task, t_rt), *coro = SLOT(task, t_coro), *element = SLOT(task, t_element);
    Py_INCREF(task); /* the step may drop the last other reference to it */
    c->depth++;
    PyObject *caller = PyObject_GetAttr(rt, str_current_element);
    if (!caller || PyObject_SetAttr(rt, str_current_element, element) < 0) {
        Py_XDECREF(caller);
        c->depth--;
        Py_DECREF(task);
        return -1;
    }
    PyObject *result = NULL, *type = NULL, *value = NULL, *tb = NULL;
    PySendResult sent = PyIter_Send(coro, Py_None, &result);
    if (sent == PYGEN_ERROR) PyErr_Fetch(&type, &value, &tb);
    int r = PyObject_SetAttr(rt, str_current_element, caller);
    Py_DECREF(caller);
    c->depth--;
    if (r < 0) goto out;
    if (sent == PYGEN_RETURN) { /* finished: on_done(value, None) */
        PyObject *res = PyObject_CallFunctionObjArgs(SLOT(task, t_on_done), result, Py_None, NULL);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    if (sent == PYGEN_ERROR) { /* raised: on_done(None, exc), as `except BaseException` does */
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        PyObject *res = PyObject_CallFunctionObjArgs(SLOT(task, t_on_done), Py_None, value, NULL);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    /* suspended on `result` */
    if (!PyObject_TypeCheck(result, (PyTypeObject *)future_cls)) { /* Task._refuse names it */
        PyObject *res = PyObject_CallMethodOneArg(task, str_refuse, result);
        r = res ? 1 : -1;
        Py_XDECREF(res);
        goto out;
    }
    Py_XSETREF(SLOT(task, t_waiting), Py_NewRef(result));
    PyObject *suspended = PyObject_GetAttr(rt, str_suspended);
    if (!suspended || PySet_Add(suspended, task) < 0) { Py_XDECREF(suspended); r = -1; goto out; }
    Py_DECREF(suspended);
    PyObject *now = PyObject_GetAttr(result, str_resume_now);
    int resume_now = now ? PyObject_IsTrue(now) : -1;
    Py_XDECREF(now);
    if (resume_now < 0) { r = -1; goto out; }
    PyObject *wake = SLOT(task, resume_now ? t_wake_now : t_wake);
    if (!wake) { PyErr_SetString(PyExc_SystemError, "a task without its wake-up"); r = -1; goto out; }
    int pending = future_pending(c, result);
    if (pending < 0) { r = -1; goto out; }
    if (pending && SLOT(result, c->off_callbacks) == Py_None) {
        PyObject *callbacks = PyList_New(1); /* add_done_callback, inlined */
        if (!callbacks) { r = -1; goto out; }
        PyList_SET_ITEM(callbacks, 0, Py_NewRef(wake));
        Py_XSETREF(SLOT(result, c->off_callbacks), callbacks);
    } else {
        PyObject *res = PyObject_CallMethodOneArg(result, str_add_done_callback, wake);
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
    Py_XSETREF(SLOT(task, t_waiting), Py_NewRef(Py_None));
    PyObject *suspended = PyObject_GetAttr(SLOT(task, t_rt), str_suspended);
    if (!suspended || PySet_Discard(suspended, task) < 0) { Py_XDECREF(suspended); return -1; }
    Py_DECREF(suspended);
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

/* configure_tasks(Task, Future): the classes whose slots the compiled steps use. */
static PyObject *configure_tasks(PyObject *unused, PyObject *args) {
    PyObject *task_cls, *fut_cls;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &task_cls, &PyType_Type, &fut_cls)) return NULL;
    Py_ssize_t offs[8];
    const char *names[8] = {"rt", "coro", "on_done", "waiting", "wake", "wake_now", "load", "element"};
    for (int i = 0; i < 8; i++)
        if ((offs[i] = slot_offset(task_cls, names[i])) < 0) return NULL;
    t_coro = offs[1], t_on_done = offs[2], t_waiting = offs[3], t_wake = offs[4], t_wake_now = offs[5];
    t_load = offs[6], t_element = offs[7];
    t_rt = offs[0]; /* last: the compiled steps run once every offset is known */
    Py_INCREF(fut_cls);
    Py_XSETREF(future_cls, fut_cls);
    Py_RETURN_NONE;
}

static PyMethodDef tasks_functions[] = {
    {"configure_tasks", configure_tasks, METH_VARARGS, "configure_tasks(Task, Future)"},
    {NULL}
};

int tasks_init(PyObject *m) {
    if (!(str_current_element = PyUnicode_InternFromString("current_element")) ||
        !(str_suspended = PyUnicode_InternFromString("suspended")) ||
        !(str_resume_now = PyUnicode_InternFromString("_resume_now")) ||
        !(str_add_done_callback = PyUnicode_InternFromString("add_done_callback")) ||
        !(str_refuse = PyUnicode_InternFromString("_refuse")))
        return -1;
    return PyModule_AddFunctions(m, tasks_functions);
}
