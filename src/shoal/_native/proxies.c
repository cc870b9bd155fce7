/* Proxies' entry methods in C: _runtime/proxy.py (_EntryDescriptor, _BoundElementEntry,
 * _BoundCollectionEntry, and _BoundEntry for sections) is the reference.
 *
 * `proxy.method` is a descriptor lookup that makes a small bound object; calling it
 * on a PE whose runtime has a compiled core goes straight to core_send_call (core_send_kw
 * with keywords, core_send_ret with `ret=True`) for an element, to core_broadcast for a
 * whole collection, and to core_send_call per member for a section whose members may take
 * one call each (Sections.direct keeps their proxies on the section proxy). Every other
 * call (a local element with keywords or `ret=True`, arguments the compiled paths do not
 * encode, a section's multicast, no core) goes to the Python hook, which is what the
 * Python bound entry does.
 */
#include "core.h"
#include <structmember.h>

static PyObject *context_globals; /* shoal._runtime.context's namespace: `_current` is the running runtime */
static PyObject *call_options; /* the keywords that are a call's options, not the method's arguments */
static PyObject *slow_call;  /* slow_call(proxy, entry, name, args, kwargs): an element's call */
static PyObject *slow_broadcast;  /* slow_broadcast(proxy, entry, name, args, kwargs): a collection's */
static PyObject *slow_multicast;  /* slow_multicast(proxy, entry, name, args, kwargs): a section's */
static PyObject *section_direct;  /* section_direct(proxy): its members' proxies for one call each, or None */
static PyObject *outcomes_call;   /* outcomes_call(proxy, entry, name, args, kwargs): method.outcomes() */
static PyObject *entry_ref;  /* proxy.EntryRef */

typedef struct {
    PyObject_HEAD
    PyObject *proxy;
    PyObject *name;
    int entry;
    vectorcallfunc vectorcall;
} BoundEntry;

enum { ELEMENT_CALL, BROADCAST, MULTICAST }; /* what an entry descriptor's bound entries do (proxy.py) */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    int entry;
    int kind; /* ELEMENT_CALL, or a collection's BROADCAST, or a section's MULTICAST */
} EntryDescriptor;

static PyTypeObject BoundEntryType, EntryDescriptorType;

int bound_entries_same(PyObject *a, PyObject *b) {
    if (!Py_IS_TYPE(a, &BoundEntryType) || !Py_IS_TYPE(b, &BoundEntryType)) return 0;
    BoundEntry *x = (BoundEntry *)a, *y = (BoundEntry *)b;
    if (x->entry != y->entry || x->vectorcall != y->vectorcall) return 0;
    if (x->proxy == y->proxy) return 1;
    /* two proxies of one element (`sink[0].collect` makes a new one each time): as Python's == says */
    int same = PyObject_RichCompareBool(x->proxy, y->proxy, Py_EQ);
    if (same < 0) PyErr_Clear();
    return same > 0;
}

static PyObject *bound_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *broadcast_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *multicast_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

int bound_element_entry(PyObject *o, PyObject **proxy, PyObject **name) {
    if (!Py_IS_TYPE(o, &BoundEntryType)) return 0;
    BoundEntry *b = (BoundEntry *)o;
    if (b->vectorcall != (vectorcallfunc)bound_vectorcall) return 0;
    *proxy = b->proxy;
    *name = b->name;
    return 1;
}

/* hook(proxy, entry, name, args, kwargs) with the call's positional and keyword arguments */
static PyObject *call_hook(PyObject *hook, PyObject *proxy, int entry_id, PyObject *name, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames) {
    if (!hook) { PyErr_SetString(PyExc_RuntimeError, "shoal._native proxies are not configured"); return NULL; }
    PyObject *tuple = PyTuple_New(nargs), *kwargs = PyDict_New();
    if (!tuple || !kwargs) { Py_XDECREF(tuple); Py_XDECREF(kwargs); return NULL; }
    for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(tuple, i, args[i]); }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
            Py_DECREF(tuple); Py_DECREF(kwargs); return NULL;
        }
    }
    PyObject *entry = PyLong_FromLong(entry_id);
    PyObject *r = entry ? PyObject_CallFunctionObjArgs(hook, proxy, entry, name, tuple, kwargs, NULL) : NULL;
    Py_XDECREF(entry);
    Py_DECREF(tuple);
    Py_DECREF(kwargs);
    return r;
}

static PyObject *bound_call_slow(BoundEntry *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *hook = self->vectorcall == (vectorcallfunc)broadcast_vectorcall   ? slow_broadcast
                     : self->vectorcall == (vectorcallfunc)multicast_vectorcall ? slow_multicast
                                                                                : slow_call;
    return call_hook(hook, self->proxy, self->entry, self->name, args, nargs, kwnames);
}

/* Whether keyword `key` is one of the call's options (configure_proxies: shoal's `ret` and
 * those proxy classes add), not an argument of the method. */
static int is_call_option(PyObject *key) {
    for (Py_ssize_t i = 0; call_options && i < PyTuple_GET_SIZE(call_options); i++) {
        PyObject *option = PyTuple_GET_ITEM(call_options, i);
        if (key == option || PyUnicode_Compare(key, option) == 0) return 1;
    }
    return 0;
}

/* Keyword arguments of a call as a dict without the call's options: NULL if one is true
 * or not a bool (the Python path then takes the call), or on an error. */
static PyObject *keywords(PyObject *const *values, PyObject *kwnames) {
    PyObject *kwargs = PyDict_New();
    if (!kwargs) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (is_call_option(key)) {
            if (!PyBool_Check(values[i])) { Py_DECREF(kwargs); return NULL; } /* the Python path refuses or takes it */
            int ret = PyObject_IsTrue(values[i]);
            if (ret != 0) { Py_DECREF(kwargs); return NULL; }
            continue;
        }
        if (PyDict_SetItem(kwargs, key, values[i]) < 0) { Py_DECREF(kwargs); return NULL; }
    }
    return kwargs;
}

/* The compiled core of the running runtime (borrowed), or NULL: none, or an error set. */
static Core *current_core(void) {
    if (context_globals == NULL) return NULL;
    PyObject *rt = PyDict_GetItemWithError(context_globals, shoal_names.current);
    return rt ? core_for(rt) : NULL;
}

/* The `ret` option of a call's keywords: 0 or 1 (`*ret`) when `ret` is the only
 * keyword (or there are none); 0 for other keywords or a `ret` that is not a bool (the
 * Python path); -1 error. */
static int ret_only(PyObject *const *values, PyObject *kwnames, int *ret) {
    *ret = 0;
    if (kwnames == NULL) return 1;
    if (PyTuple_GET_SIZE(kwnames) != 1) return 0;
    if (!keyword_is(PyTuple_GET_ITEM(kwnames, 0), "ret") || !PyBool_Check(values[0])) return 0; /* a non-bool: Python refuses it */
    int truth = PyObject_IsTrue(values[0]);
    if (truth < 0) return -1;
    *ret = truth;
    return 1;
}

static PyObject *bound_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Core *core = current_core();
    if (core) {
        int r;
        if (kwnames == NULL) {
            r = core_send_call(core, self->proxy, self->entry, args, nargs);
        } else {
            int ret, plain = ret_only(args + nargs, kwnames, &ret);
            if (plain < 0) return NULL;
            /* only ret=True, on a proxy class without call options of its own (slow_call) */
            if (plain && ret && !_PyType_Lookup(Py_TYPE(self->proxy), shoal_names.call_slow)) {
                PyObject *out;
                r = core_send_ret(core, self->proxy, self->entry, args, nargs, &out);
                if (r < 0) return NULL;
                if (r) return out;
                return bound_call_slow(self, args, nargs, kwnames);
            }
            PyObject *kwargs = keywords(args + nargs, kwnames);
            if (!kwargs) {
                if (PyErr_Occurred()) return NULL;
                return bound_call_slow(self, args, nargs, kwnames); /* a true call option: the Python path */
            }
            r = PyDict_GET_SIZE(kwargs) ? core_send_kw(core, self->proxy, self->entry, args, nargs, kwargs)
                                        : core_send_call(core, self->proxy, self->entry, args, nargs);
            Py_DECREF(kwargs);
        }
        if (r < 0) return NULL;
        if (r) Py_RETURN_NONE;
    } else if (PyErr_Occurred()) {
        return NULL;
    }
    return bound_call_slow(self, args, nargs, kwnames);
}

static PyObject *broadcast_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Core *core = current_core();
    if (core) {
        int ret, plain = ret_only(args + nargs, kwnames, &ret);
        if (plain < 0) return NULL;
        PyObject *out;
        int r = plain ? core_broadcast(core, self->proxy, self->entry, args, nargs, ret, &out) : 0;
        if (r < 0) return NULL;
        if (r) return out;
    } else if (PyErr_Occurred()) {
        return NULL;
    }
    return bound_call_slow(self, args, nargs, kwnames);
}

/* Whether `args` are cheap to send once per member: no exact array of more than
 * SECTION_SMALL bytes (sections.py's _small). */
#define SECTION_SMALL 65536
static int small_args(PyObject *const *args, Py_ssize_t nargs) {
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (is_exact_array(args[i]) && PyArray_NBYTES((PyArrayObject *)args[i]) > SECTION_SMALL) return 0;
    return 1;
}

/* The element proxies of section `proxy`'s members if its multicasts may go as one call
 * each, kept on it for the location epoch; None if not; NULL on an error. A new reference. */
static PyObject *direct_members(Core *core, PyObject *proxy) {
    PyObject *epoch = SLOT(proxy, shoal_slots.section_direct_epoch), *now = SLOT(core->locations, shoal_slots.locations_epoch);
    PyObject *kept = SLOT(proxy, shoal_slots.section_direct);
    if (epoch && now && kept) {
        int same = epoch == now ? 1 : PyObject_RichCompareBool(epoch, now, Py_EQ);
        if (same < 0) return NULL;
        if (same) return Py_NewRef(kept);
    }
    PyObject *members = PyObject_CallOneArg(section_direct, proxy);
    if (members && members != Py_None && !PyTuple_Check(members)) {
        PyErr_Format(PyExc_TypeError, "section_direct returned %R, not a tuple or None", members);
        Py_CLEAR(members);
    }
    return members;
}

/* A section's multicast without `ret=True` or keywords: one compiled call per member where
 * Sections.direct allows it. The arguments decide whether a call is taken, so the first
 * declines if any does; should a later one decline, the rest go as the Python path's calls. */
static PyObject *multicast_vectorcall(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Core *core = current_core();
    if (core) {
        int ret, plain = ret_only(args + nargs, kwnames, &ret);
        if (plain < 0) return NULL;
        if (plain && !ret && small_args(args, nargs)) {
            PyObject *members = direct_members(core, self->proxy);
            if (!members) return NULL;
            Py_ssize_t n = members == Py_None ? 0 : PyTuple_GET_SIZE(members), i = 0;
            for (; i < n; i++) {
                int r = core_send_call(core, PyTuple_GET_ITEM(members, i), self->entry, args, nargs);
                if (r < 0) { Py_DECREF(members); return NULL; }
                if (!r) break;
            }
            int err = 0;
            for (Py_ssize_t j = i; i > 0 && j < n && !err; j++) { /* the rest, as the element's Python call */
                PyObject *r = call_hook(slow_call, PyTuple_GET_ITEM(members, j), self->entry, self->name, args, nargs, NULL);
                err = r == NULL;
                Py_XDECREF(r);
            }
            Py_DECREF(members);
            if (err) return NULL;
            if (n && i > 0) Py_RETURN_NONE;
        }
    } else if (PyErr_Occurred()) {
        return NULL;
    }
    return bound_call_slow(self, args, nargs, kwnames);
}

/* outcomes(*args, **kwargs): _BoundEntry.outcomes, through the Python hook */
static PyObject *BoundEntry_outcomes(BoundEntry *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return call_hook(outcomes_call, self->proxy, self->entry, self->name, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static void BoundEntry_dealloc(BoundEntry *self) {
    Py_XDECREF(self->proxy);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *make_ref(BoundEntry *self, PyObject *args) {
    if (!entry_ref) { PyErr_SetString(PyExc_RuntimeError, "shoal._native proxies are not configured"); return NULL; }
    return args ? PyObject_CallFunctionObjArgs(entry_ref, self->proxy, self->name, args, NULL)
                : PyObject_CallFunctionObjArgs(entry_ref, self->proxy, self->name, NULL);
}

/* bind(*args): a reduction target that calls this method with `args` before the result */
static PyObject *BoundEntry_bind(BoundEntry *self, PyObject *args) {
    return make_ref(self, args);
}

static PyObject *BoundEntry_reduce(BoundEntry *self, PyObject *unused) {
    return Py_BuildValue("(O(OO))", entry_ref, self->proxy, self->name);
}

static PyObject *BoundEntry_richcompare(BoundEntry *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    PyObject *ref = make_ref(self, NULL);
    if (!ref) return NULL;
    PyObject *r = PyObject_RichCompare(ref, other, op);
    Py_DECREF(ref);
    return r;
}

static Py_hash_t BoundEntry_hash(BoundEntry *self) {
    PyObject *key = PyTuple_Pack(2, self->proxy, self->name);
    if (!key) return -1;
    Py_hash_t h = PyObject_Hash(key);
    Py_DECREF(key);
    return h;
}

static PyObject *BoundEntry_repr(BoundEntry *self) {
    return PyUnicode_FromFormat("%R.%U", self->proxy, self->name);
}

static PyMethodDef BoundEntry_methods[] = {
    {"bind", (PyCFunction)BoundEntry_bind, METH_VARARGS, "A reduction target that calls this method with args before the result."},
    {"outcomes", (PyCFunction)(void (*)(void))BoundEntry_outcomes, METH_FASTCALL | METH_KEYWORDS,
     "Broadcast this method; a future of every element's outcome (value or exception), in index order."},
    {"__reduce__", (PyCFunction)BoundEntry_reduce, METH_NOARGS, NULL},
    {NULL}
};

static PyMemberDef BoundEntry_members[] = {
    {"proxy", T_OBJECT, offsetof(BoundEntry, proxy), READONLY, "the element, collection or section proxy"},
    {"name", T_OBJECT, offsetof(BoundEntry, name), READONLY, "the entry method's name"},
    {"entry", T_INT, offsetof(BoundEntry, entry), READONLY, "the entry method's id"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(BoundEntry, vectorcall), READONLY},
    {NULL}
};

static PyTypeObject BoundEntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.BoundEntry",
    .tp_basicsize = sizeof(BoundEntry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An entry method of one element, a whole collection or a section: call it to send; use it as a reduction target.",
    .tp_vectorcall_offset = offsetof(BoundEntry, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)BoundEntry_dealloc,
    .tp_richcompare = (richcmpfunc)BoundEntry_richcompare,
    .tp_hash = (hashfunc)BoundEntry_hash,
    .tp_repr = (reprfunc)BoundEntry_repr,
    .tp_methods = BoundEntry_methods,
    .tp_members = BoundEntry_members,
};

static int EntryDescriptor_init(EntryDescriptor *self, PyObject *args, PyObject *kw) {
    PyObject *name;
    self->kind = ELEMENT_CALL;
    if (!PyArg_ParseTuple(args, "iU|i", &self->entry, &name, &self->kind)) return -1;
    if (self->kind < ELEMENT_CALL || self->kind > MULTICAST) {
        PyErr_Format(PyExc_ValueError, "EntryDescriptor: kind %d is not 0 (a call), 1 (a broadcast) or 2 (a multicast)", self->kind);
        return -1;
    }
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    return 0;
}

static void EntryDescriptor_dealloc(EntryDescriptor *self) {
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *EntryDescriptor_get(EntryDescriptor *self, PyObject *proxy, PyObject *owner) {
    if (proxy == NULL || proxy == Py_None) { Py_INCREF(self); return (PyObject *)self; }
    BoundEntry *b = PyObject_New(BoundEntry, &BoundEntryType);
    if (!b) return NULL;
    Py_INCREF(proxy);
    Py_INCREF(self->name);
    b->proxy = proxy;
    b->name = self->name;
    b->entry = self->entry;
    b->vectorcall = self->kind == BROADCAST   ? (vectorcallfunc)broadcast_vectorcall
                    : self->kind == MULTICAST ? (vectorcallfunc)multicast_vectorcall
                                              : (vectorcallfunc)bound_vectorcall;
    return (PyObject *)b;
}

static PyMemberDef EntryDescriptor_members[] = {
    {"entry", T_INT, offsetof(EntryDescriptor, entry), READONLY, "the entry method's id"},
    {"name", T_OBJECT, offsetof(EntryDescriptor, name), READONLY, "the entry method's name"},
    {"kind", T_INT, offsetof(EntryDescriptor, kind), READONLY, "0 an element's call, 1 a collection's broadcast, 2 a section's multicast"},
    {NULL}
};

static PyTypeObject EntryDescriptorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.EntryDescriptor",
    .tp_basicsize = sizeof(EntryDescriptor),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "EntryDescriptor(entry, name, kind=0): a proxy class's entry method (kind 1: a collection's broadcasts, 2: a section's multicasts).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)EntryDescriptor_init,
    .tp_dealloc = (destructor)EntryDescriptor_dealloc,
    .tp_descr_get = (descrgetfunc)EntryDescriptor_get,
    .tp_members = EntryDescriptor_members,
};

/* configure_proxies(context_namespace, slow_call, slow_broadcast, slow_multicast, section_direct,
 * outcomes_call, EntryRef, call_options): call_options, the keywords that are a call's options (str each) */
static PyObject *configure_proxies(PyObject *unused, PyObject *args) {
    PyObject *ns, *slow, *slow_bc, *slow_mc, *direct, *outcomes, *ref, *options;
    if (!PyArg_ParseTuple(args, "O!OOOOOOO!", &PyDict_Type, &ns, &slow, &slow_bc, &slow_mc, &direct, &outcomes, &ref,
                          &PyTuple_Type, &options))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(options); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(options, i)))
            return PyErr_Format(PyExc_TypeError, "configure_proxies: call option %R is not a str", PyTuple_GET_ITEM(options, i));
    Py_INCREF(options); Py_XSETREF(call_options, options);
    Py_INCREF(ns); Py_XSETREF(context_globals, ns);
    Py_INCREF(slow); Py_XSETREF(slow_call, slow);
    Py_INCREF(slow_bc); Py_XSETREF(slow_broadcast, slow_bc);
    Py_INCREF(slow_mc); Py_XSETREF(slow_multicast, slow_mc);
    Py_INCREF(direct); Py_XSETREF(section_direct, direct);
    Py_INCREF(outcomes); Py_XSETREF(outcomes_call, outcomes);
    Py_INCREF(ref); Py_XSETREF(entry_ref, ref);
    Py_RETURN_NONE;
}

static PyMethodDef proxies_functions[] = {
    {"configure_proxies", configure_proxies, METH_VARARGS,
     "configure_proxies(context_namespace, slow_call, slow_broadcast, slow_multicast, section_direct, outcomes_call, EntryRef, call_options)"},
    {NULL}
};

int proxies_init(PyObject *m) {
    if (PyType_Ready(&BoundEntryType) < 0 || PyType_Ready(&EntryDescriptorType) < 0) return -1;
    Py_INCREF(&BoundEntryType);
    if (PyModule_AddObject(m, "BoundEntry", (PyObject *)&BoundEntryType) < 0) { Py_DECREF(&BoundEntryType); return -1; }
    Py_INCREF(&EntryDescriptorType);
    if (PyModule_AddObject(m, "EntryDescriptor", (PyObject *)&EntryDescriptorType) < 0) { Py_DECREF(&EntryDescriptorType); return -1; }
    return PyModule_AddFunctions(m, proxies_functions);
}
