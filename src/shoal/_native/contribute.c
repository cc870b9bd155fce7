/* Contributions of a collection's elements, compiled (reference: Chare.contribute and
 * ReductionManager._contribute and add_from in shoal/_runtime/reductions.py).
 *
 * While a PE's elements of a dense array are still its block as created (none moved in
 * or out: CollectionState.first), or it holds a Group's element, their contributions
 * with a built-in reducer gather here, one Partial per reduction (partials.c): the
 * element's next contribution number is taken, its value kept with its element number,
 * and the target checked against the first element's, without entering Python. While a
 * core serves, Chare.contribute is this file's method descriptor. */
#include "partials.h"

/* The row-major number of element index `index` (a tuple of ints) in `shape`, or -1
 * (an index the core does not number: the Python path; no error set unless -2). */
static long element_number(PyObject *index, PyObject *shape) {
    if (!PyTuple_Check(index) || !PyTuple_Check(shape) || PyTuple_GET_SIZE(index) != PyTuple_GET_SIZE(shape)) return -1;
    long n = 0;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(index); d++) {
        long i = PyLong_AsLong(PyTuple_GET_ITEM(index, d)), size = PyLong_AsLong(PyTuple_GET_ITEM(shape, d));
        if (PyErr_Occurred()) return -2;
        if (i < 0 || i >= size) return -1;
        n = n * size + i;
    }
    return n;
}

/* Refuse a second contribution of one element in one call to the same reduction
 * (ReductionManager._check_once). 0, or -1 with the manager's error set. */
static int check_once(Core *c, Contributions *k, PyObject *el, uint64_t coll, uint32_t seq, int rid,
                      PyObject *reducer, PyObject *target) {
    if (el != k->call_el || c->calls != k->call_calls || c->received != k->call_received) {
        k->call_el = el;
        k->call_calls = c->calls;
        k->call_received = c->received;
        forget_checked(k);
    }
    for (int i = 0; i < k->nchecked; i++)
        if (k->checked[i].coll == coll && k->checked[i].rid == rid && same_target(k->checked[i].target, target)) {
            manager_raise(manager_call(k, shoal_names.twice, "(OKIOO)", el, (unsigned long long)coll,
                                           (unsigned)seq, reducer, target));
            return -1;
        }
    if (k->nchecked < CHECKED) {
        k->checked[k->nchecked].coll = coll;
        k->checked[k->nchecked].rid = rid;
        k->checked[k->nchecked].target = Py_NewRef(target); /* (a bound entry made for the call dies with it) */
        k->nchecked++;
    }
    return 0;
}

/* contribute(el, value, reducer, target) -> True: taken (Chare.contribute is done);
 * False: not a case of the core (the Python path takes it; nothing was done). */
PyObject *Core_contribute(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    Contributions *k = c->contributions;
    Exchanges *x = c->exchanges;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "contribute(el, value, reducer, target)");
        return NULL;
    }
    PyObject *el = args[0], *value = args[1], *reducer = args[2], *target = args[3];
    if (!k || !x || active != c) Py_RETURN_FALSE;
    int rid = builtin_reducer(x, reducer);
    PyObject *now = PyDict_GetItemWithError(k->context, shoal_names.current);
    if (rid < 0 || rid == R_EXACT || now != c->rt || !PyObject_TypeCheck(el, (PyTypeObject *)k->chare_cls)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    /* the collection, one whose reductions the core gathers here */
    PyObject *proxy = SLOT(el, shoal_slots.chare_collection), *info = proxy ? SLOT(proxy, shoal_slots.proxy_info) : NULL;
    PyObject *id = info ? SLOT(info, shoal_slots.info_id) : NULL;
    int group = 0;
    PyObject *cs = id ? gathering_state(c, id, &group) : NULL;
    PyObject *index = SLOT(el, shoal_slots.chare_index), *shape = info ? SLOT(info, shoal_slots.info_shape) : NULL;
    if (!cs || !index || !shape) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    long number = group ? (PyLong_CheckExact(index) ? PyLong_AsLong(index) : -1) : element_number(index, shape);
    Py_ssize_t expected = PyLong_AsSsize_t(SLOT(cs, shoal_slots.state_count));
    unsigned long long coll = PyLong_AsUnsignedLongLong(id);
    if (number == -2 || PyErr_Occurred()) return NULL;
    if (number < 0) Py_RETURN_FALSE;
    long seq = element_seq(el); /* the element's next contribution number */
    if (seq < 0) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    /* before the core may leave this one to the manager: a call's contributions are checked
     * here whichever side takes each of them */
    if (check_once(c, k, el, coll, (uint32_t)seq, rid, reducer, target) < 0) return NULL;
    Partial *p = partial_find(k, coll, (uint32_t)seq);
    if (!p) {
        int held = manager_holds(k, coll, (uint32_t)seq);
        if (held < 0) return NULL;
        if (held == 2) Py_RETURN_FALSE; /* the manager holds this PE's contributions to it already */
        PyObject *bound_proxy, *bound_name; /* `self.collection[i].done`: an EntryRef made here */
        int element = bound_element_entry(target, &bound_proxy, &bound_name);
        PyObject *kept = is_future(target) || PyObject_TypeCheck(target, (PyTypeObject *)k->entry_ref) ? Py_NewRef(target)
                       : element ? PyObject_CallFunctionObjArgs(k->entry_ref, bound_proxy, bound_name, NULL)
                       : PyObject_CallOneArg(k->check_target, target); /* a Python bound entry, or a TypeError */
        if (!kept) return NULL;
        /* to a future or an element's entry method, and none of it in the manager: this PE's
         * whole part gathers here */
        PyObject *packed = NULL;
        int whole = held != 0 ? 0 : element ? whole_element_entry(bound_proxy, bound_name, coll, &packed)
                                            : whole_target(k, coll, kept, &packed);
        p = whole < 0 ? NULL : partial_new(k, coll, (uint32_t)seq, rid, reducer, target, kept, expected, whole,
                                           SLOT(cs, shoal_slots.state_span), packed);
        Py_DECREF(kept);
        Py_XDECREF(packed);
        if (!p) return NULL;
    } else if (partial_check(k, p, target, reducer) < 0) {
        return NULL;
    }
    if (set_element_seq(el, seq + 1) < 0) return NULL;
    if (rid == R_GATHER) { /* the value with its key, as an ordered reducer's (reducers.order_key) */
        PyObject *pair = PyTuple_Pack(2, index, value);
        int err = !pair || partial_keep(p, pair, number) < 0;
        Py_XDECREF(pair);
        if (err) return NULL;
    } else if (partial_keep(p, value, number) < 0) {
        return NULL;
    }
    if (++p->got >= p->expected && partial_complete(c, k, p, 0) < 0) return NULL;
    Py_RETURN_TRUE;
}

/* Chare.contribute as Python defines it: what the compiled method falls back on */
static PyObject *python_contribute;

/* Chare.contribute(value, reducer, target, section=None), compiled: the core takes it
 * where it can (Core_contribute), else the Python method does, with the same arguments. */
static PyObject *contribute_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (!kwnames && (nargs == 3 || (nargs == 4 && args[3] == Py_None)) && active && active->contributions) {
        PyObject *call[4] = {self, args[0], args[1], args[2]};
        PyObject *taken = Core_contribute(active, call, 4);
        if (taken != Py_False) {
            if (!taken) return NULL;
            Py_DECREF(taken);
            Py_RETURN_NONE;
        }
        Py_DECREF(taken);
    }
    Py_ssize_t n = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **all = n < 8 ? small : PyMem_Malloc((size_t)(n + 1) * sizeof(PyObject *));
    if (!all) return PyErr_NoMemory();
    all[0] = self;
    memcpy(all + 1, args, (size_t)n * sizeof(PyObject *));
    PyObject *r = PyObject_Vectorcall(python_contribute, all, (size_t)(nargs + 1), kwnames);
    if (all != small) PyMem_Free(all);
    return r;
}

static PyMethodDef contribute_def = {
    "contribute", (PyCFunction)(void (*)(void))contribute_method, METH_FASTCALL | METH_KEYWORDS,
    "contribute(value, reducer, target, section=None): Chare.contribute, taken by the compiled core where it can",
};

/* contribute_method(Chare, fallback) -> the method descriptor that stands for
 * Chare.contribute while a core serves (fallback: the Python method). */
PyObject *Core_contribute_method(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "contribute_method(Chare, fallback)");
        return NULL;
    }
    Py_XSETREF(python_contribute, Py_NewRef(args[1]));
    return PyDescr_NewMethod((PyTypeObject *)args[0], &contribute_def);
}

/* use_contributions(manager, check_target, EntryRef, context, Chare, future_handle,
 * pack_entry, unpack_entry) */
PyObject *Core_use_contributions(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyType_Check(args[2]) || !PyDict_Check(args[3]) || !PyType_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "use_contributions(manager, check_target, EntryRef, context, Chare, future_handle, "
                                         "pack_entry, unpack_entry)");
        return NULL;
    }
    Contributions *k = PyMem_Calloc(1, sizeof(Contributions));
    if (!k) return PyErr_NoMemory();
    k->manager = Py_NewRef(args[0]);
    k->check_target = Py_NewRef(args[1]);
    k->entry_ref = Py_NewRef(args[2]);
    k->context = Py_NewRef(args[3]);
    k->chare_cls = Py_NewRef(args[4]);
    k->handle = Py_NewRef(args[5]);
    k->pack_entry = Py_NewRef(args[6]);
    k->unpack_entry = Py_NewRef(args[7]);
    contributions_free(c->contributions);
    c->contributions = k;
    Py_RETURN_NONE;
}
