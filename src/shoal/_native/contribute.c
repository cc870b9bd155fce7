/* Contributions to a collection's reductions, compiled (reference: Chare.contribute and
 * ReductionManager._contribute, add_from, add and _maybe_done in shoal/_runtime).
 *
 * While a PE's elements of a dense array are still its block as created (none moved in
 * or out: CollectionState.first), their contributions with a built-in reducer gather
 * here, one Partial per reduction: the element's next contribution number is taken, its
 * value kept with its element number, and the target checked against the first
 * element's, without entering Python. When the last of the PE's elements has
 * contributed, the values combine in element order (what the Python path's keys give)
 * into one value, handed to the manager (ReductionManager.add_own), which adds it before
 * the children's partials and goes on up the tree as before. Values the core does not
 * combine itself (arrays) go to the manager one by one, with their element numbers.
 *
 * The Python manager stays the owner of every other case, and the two never share one
 * reduction's contributions of this PE: the core starts a Partial only when the manager
 * holds none of this PE's own (has_own), and hands its Partials over when an element
 * moves (Core.contributions_release) or the collection is destroyed. */
#include "core.h"
#include <stdarg.h>

enum { R_SUM, R_PRODUCT, R_MAX, R_MIN, R_AND, R_OR, R_NOP }; /* exchange.c's numbering */
#define CHECKED 4 /* contributions of one call remembered to refuse a second one */

/* One PE's contributions to one reduction of one collection. */
typedef struct Partial {
    struct Partial *next;
    uint64_t coll;
    uint32_t seq;
    int rid;                   /* the built-in reducer's number */
    PyObject *reducer;
    PyObject *given, *target;  /* the target as the first element gave it, and as Python keeps it */
    PyObject *first_value;     /* nop: the one value that stands if it is the only one */
    PyObject *values;          /* others: a list, in arrival order */
    long *numbers;             /* the elements' row-major numbers, in arrival order */
    Py_ssize_t got, expected, capacity;
    long min_number;
    int in_order;              /* numbers arrived increasing */
} Partial;

struct Contributions {
    PyObject *manager;         /* the ReductionManager: has_own, add_own and its errors */
    PyObject *check_target;    /* reductions._check_target(target) -> what Python keeps */
    PyObject *entry_ref;       /* proxy.EntryRef: a target kept as it is */
    PyObject *context;         /* the context module's namespace (_current) */
    PyObject *chare_cls;       /* Chare: a contributor must be one (its slots are read) */
    Partial *list, *last;      /* `last`: the Partial used last (one reduction at a time, mostly) */
    /* the contributions of the call running now, to refuse a second one to the same reduction */
    PyObject *call_el;         /* borrowed: compared, never used */
    long long call_calls, call_received;
    struct { uint64_t coll; int rid; PyObject *target; } checked[CHECKED];
    int nchecked;
};

static void partial_free(Partial *p) {
    Py_XDECREF(p->reducer);
    Py_XDECREF(p->given);
    Py_XDECREF(p->target);
    Py_XDECREF(p->first_value);
    Py_XDECREF(p->values);
    PyMem_Free(p->numbers);
    PyMem_Free(p);
}

static void unlink_partial(Contributions *k, Partial *gone) {
    if (k->last == gone) k->last = NULL;
    for (Partial **p = &k->list; *p; p = &(*p)->next)
        if (*p == gone) { *p = gone->next; return; }
}

void contributions_free(Contributions *k) {
    if (!k) return;
    while (k->list) {
        Partial *p = k->list;
        k->list = p->next;
        partial_free(p);
    }
    Py_XDECREF(k->manager);
    Py_XDECREF(k->check_target);
    Py_XDECREF(k->entry_ref);
    Py_XDECREF(k->context);
    Py_XDECREF(k->chare_cls);
    PyMem_Free(k);
}

static Partial *find_partial(Contributions *k, uint64_t coll, uint32_t seq) {
    if (k->last && k->last->coll == coll && k->last->seq == seq) return k->last;
    for (Partial *p = k->list; p; p = p->next)
        if (p->coll == coll && p->seq == seq) return k->last = p;
    return NULL;
}

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

/* Whether targets `a` and `b` are the same entry method of the same proxy object
 * (compiled bound entries, as `self.collection.done` makes a new one each time). */
static int same_target(PyObject *a, PyObject *b) {
    return a == b || bound_entries_same(a, b);
}

/* The manager's method `name` called with `format`'s values (Py_BuildValue's): a new
 * reference, or NULL with an error. */
static PyObject *call_manager(Contributions *k, PyObject *name, const char *format, ...) {
    va_list va;
    va_start(va, format);
    PyObject *args = Py_VaBuildValue(format, va);
    va_end(va);
    PyObject *fn = args ? PyObject_GetAttr(k->manager, name) : NULL;
    PyObject *r = fn ? PyObject_CallObject(fn, args) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    return r;
}

/* Raise the error the manager made (its method returns the exception). */
static void raise_from(PyObject *exc) {
    if (!exc) return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* Refuse a second contribution of one element in one call to the same reduction
 * (ReductionManager._check_once). 0, or -1 with the manager's error set. */
static int check_once(Core *c, Contributions *k, PyObject *el, uint64_t coll, uint32_t seq, int rid,
                      PyObject *reducer, PyObject *target) {
    if (el != k->call_el || c->calls != k->call_calls || c->received != k->call_received) {
        k->call_el = el;
        k->call_calls = c->calls;
        k->call_received = c->received;
        k->nchecked = 0;
    }
    for (int i = 0; i < k->nchecked; i++)
        if (k->checked[i].coll == coll && k->checked[i].rid == rid && same_target(k->checked[i].target, target)) {
            raise_from(call_manager(k, shoal_names.twice, "(OKIOO)", el, (unsigned long long)coll,
                                           (unsigned)seq, reducer, target));
            return -1;
        }
    if (k->nchecked < CHECKED) {
        k->checked[k->nchecked].coll = coll;
        k->checked[k->nchecked].rid = rid;
        k->checked[k->nchecked].target = target; /* compared while the call runs, which holds it */
        k->nchecked++;
    }
    return 0;
}

/* A new Partial for reduction `seq` of `coll`, or NULL: with an error, or without one if
 * the manager already holds contributions of this PE for it (the Python path goes on). */
static Partial *new_partial(Contributions *k, uint64_t coll, uint32_t seq, int rid, PyObject *reducer,
                            PyObject *target, Py_ssize_t expected) {
    PyObject *own = call_manager(k, shoal_names.has_own, "(KI)", (unsigned long long)coll, (unsigned)seq);
    if (!own) return NULL;
    int has = PyObject_IsTrue(own);
    Py_DECREF(own);
    if (has) return NULL;
    PyObject *kept = target;
    if (PyObject_TypeCheck(target, (PyTypeObject *)active->future_cls) || PyObject_TypeCheck(target, (PyTypeObject *)k->entry_ref))
        Py_INCREF(kept);
    else if (!(kept = PyObject_CallOneArg(k->check_target, target))) /* a bound entry method, or a TypeError */
        return NULL;
    Partial *p = PyMem_Calloc(1, sizeof(Partial));
    if (!p) { Py_DECREF(kept); PyErr_NoMemory(); return NULL; }
    p->coll = coll;
    p->seq = seq;
    p->rid = rid;
    p->reducer = Py_NewRef(reducer);
    p->given = Py_NewRef(target);
    p->target = kept;
    p->expected = expected;
    p->in_order = 1;
    p->min_number = LONG_MAX;
    if (rid != R_NOP) {
        p->capacity = expected < 1024 ? expected : 1024;
        p->values = PyList_New(0);
        p->numbers = PyMem_Malloc((size_t)p->capacity * sizeof(long));
        if (!p->values || !p->numbers) { partial_free(p); PyErr_NoMemory(); return NULL; }
    }
    p->next = k->list;
    k->list = k->last = p;
    return p;
}

/* Whether `target` is the target of `p` (0), or -1 with the manager's error: they disagree. */
static int check_target(Contributions *k, Partial *p, PyObject *target, PyObject *reducer) {
    if (reducer == p->reducer && (same_target(target, p->given) || target == p->target)) return 0;
    int same = reducer == p->reducer;
    if (same) {
        PyObject *kept = PyObject_CallOneArg(k->check_target, target);
        if (!kept) return -1;
        same = PyObject_RichCompareBool(kept, p->target, Py_EQ);
        Py_DECREF(kept);
        if (same < 0) return -1;
        if (same) return 0;
    }
    raise_from(call_manager(k, shoal_names.disagree, "((K)IOOOO)", (unsigned long long)p->coll,
                                   (unsigned)p->seq, p->reducer, p->target, reducer, target));
    return -1;
}

/* Keep `value` of element number `number` in `p`. 0 or -1. */
static int keep(Partial *p, PyObject *value, long number) {
    if (number < p->min_number) p->min_number = number;
    if (p->rid == R_NOP) {
        if (p->got == 0) p->first_value = Py_NewRef(value);
        return 0;
    }
    Py_ssize_t n = PyList_GET_SIZE(p->values);
    if (n && p->numbers[n - 1] > number) p->in_order = 0;
    if (n == p->capacity) {
        Py_ssize_t cap = p->capacity * 2 + 16;
        long *more = PyMem_Realloc(p->numbers, (size_t)cap * sizeof(long));
        if (!more) { PyErr_NoMemory(); return -1; }
        p->numbers = more;
        p->capacity = cap;
    }
    p->numbers[n] = number;
    return PyList_Append(p->values, value);
}

static long *sort_numbers;
static int by_number(const void *a, const void *b) {
    long x = sort_numbers[*(const Py_ssize_t *)a], y = sort_numbers[*(const Py_ssize_t *)b];
    return (x > y) - (x < y);
}

/* Put the values of `p` (and their numbers) in element order. 0 or -1. */
static int sort_partial(Partial *p) {
    Py_ssize_t n = PyList_GET_SIZE(p->values);
    if (p->in_order || n < 2) return 0;
    Py_ssize_t *order = PyMem_Malloc((size_t)n * sizeof(Py_ssize_t));
    long *numbers = PyMem_Malloc((size_t)n * sizeof(long));
    PyObject *values = PyList_New(n);
    if (!order || !numbers || !values) {
        PyMem_Free(order);
        PyMem_Free(numbers);
        Py_XDECREF(values);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = i;
    sort_numbers = p->numbers;
    qsort(order, (size_t)n, sizeof *order, by_number);
    for (Py_ssize_t i = 0; i < n; i++) {
        numbers[i] = p->numbers[order[i]];
        PyList_SET_ITEM(values, i, Py_NewRef(PyList_GET_ITEM(p->values, order[i])));
    }
    PyMem_Free(order);
    PyMem_Free(p->numbers);
    p->numbers = numbers;
    Py_SETREF(p->values, values);
    p->in_order = 1;
    return 0;
}

/* The values of `p` (in element order, none an array) folded left to right, as the
 * reducer's combine does (reducers._fold: functools.reduce of its operator): a new reference. */
static PyObject *fold(Exchanges *x, Partial *p) {
    Py_ssize_t n = PyList_GET_SIZE(p->values);
    PyObject **v = PySequence_Fast_ITEMS(p->values);
    if (p->rid == R_SUM || p->rid == R_PRODUCT) {
        Py_ssize_t i = 0;
        while (i < n && PyFloat_CheckExact(v[i])) i++;
        if (i == n) { /* floats: the same IEEE operations, in the same order */
            double acc = PyFloat_AS_DOUBLE(v[0]);
            if (p->rid == R_SUM) for (i = 1; i < n; i++) acc += PyFloat_AS_DOUBLE(v[i]);
            else for (i = 1; i < n; i++) acc *= PyFloat_AS_DOUBLE(v[i]);
            return PyFloat_FromDouble(acc);
        }
    }
    PyObject *acc = Py_NewRef(v[0]);
    for (Py_ssize_t i = 1; acc && i < n; i++) Py_SETREF(acc, combine_two(x, p->reducer, acc, v[i]));
    return acc;
}

/* Hand `p`'s contributions to the manager (add_own): combined into one value where the
 * core combines them, else one by one. 0 or -1. `p` is unlinked first and freed. */
static int hand_over(Core *c, Contributions *k, Partial *p, int combine) {
    unlink_partial(k, p);
    PyObject *values = NULL, *numbers = NULL;
    int err = 0;
    if (p->rid == R_NOP) { /* no value; the only one stands alone (as Python's path has it) */
        values = Py_BuildValue("[O]", p->got == 1 && p->first_value ? p->first_value : Py_None);
        numbers = values ? Py_BuildValue("[l]", p->min_number) : NULL;
    } else if (sort_partial(p) < 0) {
        err = -1;
    } else {
        Py_ssize_t n = PyList_GET_SIZE(p->values);
        int arrays = 0;
        for (Py_ssize_t i = 0; i < n && !arrays; i++) arrays = is_array(PyList_GET_ITEM(p->values, i));
        if (combine && n && !arrays) {
            PyObject *value = fold(c->exchanges, p);
            values = value ? PyList_New(1) : NULL;
            if (values) PyList_SET_ITEM(values, 0, value);
            else Py_XDECREF(value);
            numbers = values ? Py_BuildValue("[l]", p->min_number) : NULL;
        } else {
            values = Py_NewRef(p->values);
            numbers = PyList_New(n);
            for (Py_ssize_t i = 0; numbers && i < n; i++) {
                PyObject *number = PyLong_FromLong(p->numbers[i]);
                if (!number) Py_CLEAR(numbers);
                else PyList_SET_ITEM(numbers, i, number);
            }
        }
    }
    if (!err && values && numbers) {
        PyObject *r = call_manager(k, shoal_names.add_own, "(KIOOnOO)", (unsigned long long)p->coll, (unsigned)p->seq,
                                          values, numbers, p->got, p->reducer, p->target);
        if (r) Py_DECREF(r); else err = -1;
    } else {
        err = -1;
    }
    Py_XDECREF(values);
    Py_XDECREF(numbers);
    partial_free(p);
    return err;
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
    if (rid < 0 || rid > R_NOP || now != c->rt || !PyObject_TypeCheck(el, (PyTypeObject *)k->chare_cls)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    /* the collection, complete here, its elements still this PE's block as created */
    PyObject *proxy = SLOT(el, shoal_slots.chare_collection), *info = proxy ? SLOT(proxy, shoal_slots.proxy_info) : NULL;
    PyObject *id = info ? SLOT(info, shoal_slots.info_id) : NULL;
    PyObject *cs = id ? PyDict_GetItemWithError(c->colls, id) : NULL;
    if (!cs) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    PyObject *first = SLOT(cs, shoal_slots.state_first), *count = SLOT(cs, shoal_slots.state_count);
    PyObject *span = SLOT(cs, shoal_slots.state_span), *shape = SLOT(info, shoal_slots.info_shape);
    PyObject *index = SLOT(el, shoal_slots.chare_index);
    if (SLOT(cs, shoal_slots.state_done) != Py_True || !first || !PyLong_CheckExact(first) || !count || !span ||
        span == Py_None || !shape || !index)
        Py_RETURN_FALSE;
    long block = PyLong_AsLong(first), number = block < 0 ? -1 : element_number(index, shape);
    Py_ssize_t expected = PyLong_AsSsize_t(count);
    unsigned long long coll = PyLong_AsUnsignedLongLong(id);
    if (number == -2 || PyErr_Occurred()) return NULL;
    if (number < 0 || expected < 1) Py_RETURN_FALSE;
    long seq = element_seq(el); /* the element's next contribution number */
    if (seq < 0) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    Partial *p = find_partial(k, coll, (uint32_t)seq);
    if (!p) {
        p = new_partial(k, coll, (uint32_t)seq, rid, reducer, target, expected);
        if (!p) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_FALSE; /* the manager holds this PE's contributions to it already */
        }
    } else if (check_target(k, p, target, reducer) < 0) {
        return NULL;
    }
    if (check_once(c, k, el, coll, (uint32_t)seq, rid, reducer, target) < 0) return NULL;
    if (set_element_seq(el, seq + 1) < 0 || keep(p, value, number) < 0) return NULL;
    if (++p->got >= p->expected && hand_over(c, k, p, 1) < 0) return NULL;
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

/* use_contributions(manager, check_target, EntryRef, context, Chare) */
PyObject *Core_use_contributions(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyType_Check(args[2]) || !PyDict_Check(args[3]) || !PyType_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "use_contributions(manager, check_target, EntryRef, context, Chare)");
        return NULL;
    }
    Contributions *k = PyMem_Calloc(1, sizeof(Contributions));
    if (!k) return PyErr_NoMemory();
    k->manager = Py_NewRef(args[0]);
    k->check_target = Py_NewRef(args[1]);
    k->entry_ref = Py_NewRef(args[2]);
    k->context = Py_NewRef(args[3]);
    k->chare_cls = Py_NewRef(args[4]);
    contributions_free(c->contributions);
    c->contributions = k;
    Py_RETURN_NONE;
}

/* contributions_release(coll): hand this PE's contributions to collection `coll`'s
 * reductions over to the manager, one by one (an element moved: the Python path owns
 * its reductions from now on). */
PyObject *Core_contributions_release(Core *c, PyObject *coll_obj) {
    Contributions *k = c->contributions;
    unsigned long long coll = PyLong_AsUnsignedLongLong(coll_obj);
    if (PyErr_Occurred()) return NULL;
    for (;;) { /* from the head each time: add_own runs Python code */
        Partial *p = k ? k->list : NULL;
        while (p && p->coll != coll) p = p->next;
        if (!p) Py_RETURN_NONE;
        if (hand_over(c, k, p, 0) < 0) return NULL;
    }
}

/* contributions_forget(coll): drop collection `coll`'s contributions (it was destroyed). */
PyObject *Core_contributions_forget(Core *c, PyObject *coll_obj) {
    Contributions *k = c->contributions;
    unsigned long long coll = PyLong_AsUnsignedLongLong(coll_obj);
    if (PyErr_Occurred()) return NULL;
    for (Partial **p = k ? &k->list : NULL; p && *p;) {
        Partial *gone = *p;
        if (gone->coll == coll) {
            *p = gone->next;
            if (k->last == gone) k->last = NULL;
            partial_free(gone);
        } else {
            p = &gone->next;
        }
    }
    Py_RETURN_NONE;
}

/* contributions_under_way() -> [(coll, seq, got, reducer, target)]: for deadlock reports and tests. */
PyObject *Core_contributions_under_way(Core *c, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (Partial *p = c->contributions ? c->contributions->list : NULL; out && p; p = p->next) {
        PyObject *item = Py_BuildValue("(KInOO)", (unsigned long long)p->coll, (unsigned)p->seq, p->got, p->reducer, p->target);
        if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}
