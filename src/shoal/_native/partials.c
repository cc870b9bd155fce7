/* One PE's part of each reduction the compiled core gathers (reference:
 * ReductionManager.receive, add and _maybe_done in shoal/_runtime/reductions.py), one
 * Partial per reduction; contribute.c fills them from the elements.
 *
 * A Partial to a future holds this PE's whole part of the reduction: its elements' values
 * and its children's partials in the collection's tree, which come as compact REDUCE
 * messages (TO_FUTURE: the future and the value, no pickled payload). When all are here,
 * they combine in element order, then PE order (the order the Python path's keys give,
 * so the same bits) and go on to the parent, or at the root resolve the future. To
 * another target, the Partial holds this PE's elements' values only and hands them,
 * combined, to the manager (ReductionManager.add_own), which goes on as before. Values
 * the core does not combine itself (arrays) go to the manager one by one, with their keys.
 *
 * The Python manager stays the owner of every other case, and the two never share one
 * reduction's part of this PE: the core starts a Partial only when the manager holds
 * none of its own contributions (holds), takes a child's partial only into a Partial
 * that waits for it, and hands its Partials over when an element moves
 * (Core.contributions_release) or the collection is destroyed. */
#include "partials.h"
#include <stdarg.h>

void partial_free(Partial *p) {
    Py_XDECREF(p->reducer);
    Py_XDECREF(p->given);
    Py_XDECREF(p->target);
    Py_XDECREF(p->first_value);
    Py_XDECREF(p->values);
    Py_XDECREF(p->kids);
    Py_XDECREF(p->packed);
    PyMem_Free(p->numbers);
    PyMem_Free(p);
}

static void unlink_partial(Contributions *k, Partial *gone) {
    if (k->last == gone) k->last = NULL;
    for (Partial **p = &k->list; *p; p = &(*p)->next)
        if (*p == gone) { *p = gone->next; return; }
}

void forget_checked(Contributions *k) {
    while (k->nchecked > 0) { /* (Py_CLEAR names its argument twice: no side effect in it) */
        k->nchecked--;
        Py_CLEAR(k->checked[k->nchecked].target);
    }
}

void contributions_free(Contributions *k) {
    if (!k) return;
    while (k->list) {
        Partial *p = k->list;
        k->list = p->next;
        partial_free(p);
    }
    forget_checked(k);
    Py_XDECREF(k->manager);
    Py_XDECREF(k->handle);
    Py_XDECREF(k->check_target);
    Py_XDECREF(k->entry_ref);
    Py_XDECREF(k->context);
    Py_XDECREF(k->chare_cls);
    Py_XDECREF(k->pack_entry);
    Py_XDECREF(k->unpack_entry);
    PyMem_Free(k);
}

Partial *partial_find(Contributions *k, uint64_t coll, uint32_t seq) {
    if (k->last && k->last->coll == coll && k->last->seq == seq) return k->last;
    for (Partial *p = k->list; p; p = p->next)
        if (p->coll == coll && p->seq == seq) return k->last = p;
    return NULL;
}

/* Whether targets `a` and `b` are the same entry method of the same proxy object
 * (compiled bound entries, as `self.collection.done` makes a new one each time). */
int same_target(PyObject *a, PyObject *b) {
    return a == b || bound_entries_same(a, b);
}

/* The manager's method `name` called with `format`'s values (Py_BuildValue's): a new
 * reference, or NULL with an error. */
PyObject *manager_call(Contributions *k, PyObject *name, const char *format, ...) {
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
void manager_raise(PyObject *exc) {
    if (!exc) return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* What the manager holds of reduction `seq` of `coll` here: 0 nothing, 1 a partial of
 * children's values only, 2 one with this PE's own contributions; -1 error. */
int manager_holds(Contributions *k, uint64_t coll, uint32_t seq) {
    PyObject *r = manager_call(k, shoal_names.holds, "(KI)", (unsigned long long)coll, (unsigned)seq);
    if (!r) return -1;
    long held = PyLong_AsLong(r);
    Py_DECREF(r);
    return held == -1 && PyErr_Occurred() ? -1 : (int)held;
}

int is_future(PyObject *o) { return PyObject_TypeCheck(o, (PyTypeObject *)active->future_cls); }

int whole_element_entry(PyObject *proxy, PyObject *name, uint64_t coll, PyObject **packed) {
    *packed = NULL;
    PyObject *info = SLOT(proxy, shoal_slots.proxy_info), *index = SLOT(proxy, shoal_slots.proxy_index);
    PyObject *id = info ? SLOT(info, shoal_slots.info_id) : NULL;
    if (!id || !index) return 0;
    unsigned long long of = PyLong_AsUnsignedLongLong(id);
    if (of == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (of != coll) return 0; /* another collection's element: its index means nothing to this tree */
    PyObject *none = PyTuple_New(0); /* (the empty tuple: an EntryRef's leading arguments) */
    *packed = none ? PyTuple_Pack(3, index, name, none) : NULL;
    Py_XDECREF(none);
    return *packed ? 1 : -1;
}

int whole_target(Contributions *k, uint64_t coll, PyObject *target, PyObject **packed) {
    *packed = NULL;
    if (is_future(target)) return 1;
    if (!PyObject_TypeCheck(target, (PyTypeObject *)k->entry_ref)) return 0;
    PyObject *r = PyObject_CallFunction(k->pack_entry, "KO", (unsigned long long)coll, target);
    if (!r) return -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3) { Py_DECREF(r); return 0; } /* not an element of `coll` */
    *packed = r;
    return 1;
}

/* The state of collection `id` here if the core gathers its reductions: complete, its
 * tree known, with elements here that are its dense block as created or a Group's one;
 * `*group` says which. Borrowed, or NULL (with an error, or without: not a core's case). */
PyObject *gathering_state(Core *c, PyObject *id, int *group) {
    PyObject *cs = PyDict_GetItemWithError(c->colls, id);
    if (!cs) return NULL;
    PyObject *info = SLOT(cs, shoal_slots.state_info), *first = SLOT(cs, shoal_slots.state_first);
    PyObject *count = SLOT(cs, shoal_slots.state_count), *span = SLOT(cs, shoal_slots.state_span);
    PyObject *kind = info ? SLOT(info, shoal_slots.info_kind) : NULL;
    if (SLOT(cs, shoal_slots.state_done) != Py_True || !first || !count || !PyLong_CheckExact(count) || !span ||
        span == Py_None || !SLOT(span, shoal_slots.tree_children) || !PyTuple_Check(SLOT(span, shoal_slots.tree_children)) ||
        !SLOT(span, shoal_slots.tree_parent) || !kind || !PyUnicode_Check(kind) || PyLong_AsLong(count) < 1)
        return NULL;
    long block = PyLong_AsLong(first);
    if (PyErr_Occurred()) return NULL;
    *group = block < 0 && PyUnicode_CompareWithASCIIString(kind, "group") == 0;
    return block >= 0 || *group ? cs : NULL;
}

/* A new Partial for reduction `seq` of `coll` with `reducer` (number `rid`) and target
 * `kept` (as Python keeps it; the element gave `given`, NULL for a child's), expecting
 * the `count` values of this PE's elements, and if `whole`, those of its children in
 * `span` (its tree links); `packed`: a whole one's entry-method target as it travels
 * (NULL for a future). NULL with an error. */
Partial *partial_new(Contributions *k, uint64_t coll, uint32_t seq, int rid, PyObject *reducer,
                     PyObject *given, PyObject *kept, Py_ssize_t count, int whole, PyObject *span,
                     PyObject *packed) {
    Partial *p = PyMem_Calloc(1, sizeof(Partial));
    if (!p) { PyErr_NoMemory(); return NULL; }
    p->coll = coll;
    p->seq = seq;
    p->rid = rid;
    p->reducer = Py_NewRef(reducer);
    p->given = Py_XNewRef(given);
    p->target = Py_NewRef(kept);
    p->expected = count;
    p->in_order = 1;
    p->min_number = LONG_MAX;
    p->parent = -1;
    if (whole) {
        p->whole = 1;
        p->packed = Py_XNewRef(packed);
        p->expected += PyTuple_GET_SIZE(SLOT(span, shoal_slots.tree_children));
        p->parent = PyLong_AsLong(SLOT(span, shoal_slots.tree_parent));
        p->kids = PyList_New(0);
        if (!p->kids || PyErr_Occurred()) { partial_free(p); return NULL; }
    }
    if (rid != R_NOP) {
        p->capacity = count < 1024 ? count : 1024;
        p->values = PyList_New(0);
        p->numbers = PyMem_Malloc((size_t)p->capacity * sizeof(long));
        if (!p->values || !p->numbers) { partial_free(p); PyErr_NoMemory(); return NULL; }
    }
    p->next = k->list;
    k->list = k->last = p;
    return p;
}

/* Whether two targets are the same future (owner and number), as Future.__eq__ says:
 * 1 yes, 0 no (or not both futures), -1 error. */
static int same_future(PyObject *a, PyObject *b) {
    if (!is_future(a) || !is_future(b)) return 0;
    PyObject *oa = SLOT(a, shoal_slots.future_owner), *ob = SLOT(b, shoal_slots.future_owner);
    PyObject *fa = SLOT(a, shoal_slots.future_fid), *fb = SLOT(b, shoal_slots.future_fid);
    if (!oa || !ob || !fa || !fb) return 0;
    int same = PyObject_RichCompareBool(oa, ob, Py_EQ);
    return same <= 0 ? same : PyObject_RichCompareBool(fa, fb, Py_EQ);
}

/* Whether `reducer` and `target` are those of `p` (0), or -1 with the manager's error:
 * they disagree. */
int partial_check(Contributions *k, Partial *p, PyObject *target, PyObject *reducer) {
    if (reducer == p->reducer) {
        if (target == p->target || (p->given && same_target(target, p->given))) return 0;
        int same = same_future(target, p->target);
        if (!same && !is_future(target)) { /* a bound entry method of another proxy object, say */
            PyObject *kept = PyObject_CallOneArg(k->check_target, target);
            if (!kept) return -1;
            same = PyObject_RichCompareBool(kept, p->target, Py_EQ);
            Py_DECREF(kept);
        }
        if (same < 0) return -1;
        if (same) {
            if (!p->given) p->given = Py_NewRef(target); /* (a Partial a child's partial began) */
            return 0;
        }
    }
    manager_raise(manager_call(k, shoal_names.disagree, "((K)IOOOO)", (unsigned long long)p->coll,
                                   (unsigned)p->seq, p->reducer, p->target, reducer, target));
    return -1;
}

/* Keep `value` of element number `number` in `p`. 0 or -1. */
int partial_keep(Partial *p, PyObject *value, long number) {
    if (number < p->min_number) p->min_number = number;
    if (p->rid == R_NOP) {
        if (!p->first_value) p->first_value = Py_NewRef(value);
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

/* Whether the core combines the values of `p` (its elements' and its children's) as the
 * reducer's combine does on them all at once: no array among them, or arrays only, of one
 * shape and dtype (pairwise folding then gives the same bits; mixed dtypes would not). */
static int combinable(Partial *p) {
    if (p->rid == R_NOP || p->rid == R_GATHER) return 1;
    PyObject *first = NULL;
    Py_ssize_t n = PyList_GET_SIZE(p->values), nkids = p->kids ? PyList_GET_SIZE(p->kids) : 0;
    int arrays = 0, others = 0;
    for (Py_ssize_t i = 0; i < n + nkids; i++) {
        PyObject *v = i < n ? PyList_GET_ITEM(p->values, i) : PyTuple_GET_ITEM(PyList_GET_ITEM(p->kids, i - n), 1);
        if (!is_array(v)) { others = 1; continue; }
        arrays = 1;
        if (!is_exact_array(v)) return 0;
        if (!first) first = v;
        else if (!PyArray_SAMESHAPE((PyArrayObject *)first, (PyArrayObject *)v) ||
                 !PyArray_EquivTypes(PyArray_DESCR((PyArrayObject *)first), PyArray_DESCR((PyArrayObject *)v)))
            return 0;
    }
    return !(arrays && others);
}

/* A gather's values (its elements' (index, value) pairs and its children's sequences of
 * them) as one tuple of pairs in index order: what reducers.gather's combine and
 * partials.in_order make of them (a new reference). */
static PyObject *gathered(Partial *p) {
    Py_ssize_t nkids = p->kids ? PyList_GET_SIZE(p->kids) : 0;
    if (sort_partial(p) < 0) return NULL;
    if (nkids == 0) return PyList_AsTuple(p->values);
    PyObject *all = PyList_GetSlice(p->values, 0, PyList_GET_SIZE(p->values));
    for (Py_ssize_t i = 0; all && i < nkids; i++) {
        PyObject *kid = PySequence_Fast(PyTuple_GET_ITEM(PyList_GET_ITEM(p->kids, i), 1), "a gather's partial is a sequence");
        int err = !kid || PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), kid) < 0; /* appended */
        Py_XDECREF(kid);
        if (err) Py_CLEAR(all);
    }
    if (!all || PyList_Sort(all) < 0) { /* the keys differ: only they are compared */
        Py_XDECREF(all);
        return NULL;
    }
    PyObject *out = PyList_AsTuple(all);
    Py_DECREF(all);
    return out;
}

/* Every value of `p` combined: its elements' in element order, then its children's in PE
 * order (a new reference). */
static PyObject *combined(Core *c, Partial *p) {
    Py_ssize_t nkids = p->kids ? PyList_GET_SIZE(p->kids) : 0;
    if (p->rid == R_NOP) /* no value; the only one stands alone (as Python's path has it) */
        return Py_NewRef(p->got == 1 && p->first_value ? p->first_value : Py_None);
    if (p->rid == R_GATHER) return gathered(p);
    if (sort_partial(p) < 0 || (nkids > 1 && PyList_Sort(p->kids) < 0)) return NULL;
    PyObject *acc = PyList_GET_SIZE(p->values) ? fold(c->exchanges, p) : NULL;
    if (!acc && PyErr_Occurred()) return NULL;
    for (Py_ssize_t i = 0; i < nkids; i++) {
        PyObject *kid = PyTuple_GET_ITEM(PyList_GET_ITEM(p->kids, i), 1);
        PyObject *next = acc ? combine_two(c->exchanges, p->reducer, acc, kid) : Py_NewRef(kid);
        Py_XDECREF(acc);
        if (!next) return NULL;
        acc = next;
    }
    return acc;
}

/* Hand `p` over to the manager (add_own): its values combined into one if `combine` and
 * the core combines them, else one by one with their elements' numbers and children's
 * PEs. 0 or -1. `p` is unlinked first and freed. */
static int hand_over(Core *c, Contributions *k, Partial *p, int combine) {
    unlink_partial(k, p);
    PyObject *values = NULL, *numbers = NULL, *kids = NULL;
    Py_ssize_t own = p->got - (p->kids ? PyList_GET_SIZE(p->kids) : 0);
    if ((combine || p->rid == R_GATHER) && combinable(p)) { /* (a gather's pairs keep their keys) */
        PyObject *value = combined(c, p);
        values = value ? PyList_New(1) : NULL;
        if (values) PyList_SET_ITEM(values, 0, value);
        else Py_XDECREF(value);
        numbers = values ? Py_BuildValue("[l]", p->min_number) : NULL;
        kids = PyList_New(0);
    } else if (p->rid == R_NOP) {
        values = Py_BuildValue("[O]", p->got == 1 && p->first_value ? p->first_value : Py_None);
        numbers = values ? Py_BuildValue("[l]", p->min_number) : NULL;
        kids = PyList_New(0); /* (their values add nothing: more than one value makes None) */
    } else if (sort_partial(p) == 0) {
        Py_ssize_t n = PyList_GET_SIZE(p->values);
        values = Py_NewRef(p->values);
        numbers = PyList_New(n);
        for (Py_ssize_t i = 0; numbers && i < n; i++) {
            PyObject *number = PyLong_FromLong(p->numbers[i]);
            if (!number) Py_CLEAR(numbers);
            else PyList_SET_ITEM(numbers, i, number);
        }
        kids = p->kids ? Py_NewRef(p->kids) : PyList_New(0);
    }
    int err = -1;
    if (values && numbers && kids) {
        PyObject *r = manager_call(k, shoal_names.add_own, "(KIOOnnOOO)", (unsigned long long)p->coll, (unsigned)p->seq,
                                   values, numbers, own, p->got, p->reducer, p->target, kids);
        if (r) { Py_DECREF(r); err = 0; }
    }
    Py_XDECREF(values);
    Py_XDECREF(numbers);
    Py_XDECREF(kids);
    partial_free(p);
    return err;
}

/* `p` is complete: its value to the parent, or (the root) to the future or entry method
 * (results.c; `delivered`: a received message completed it); a Partial of another
 * target, or of arrays, to the manager. 0 or -1. `p` is freed. */
int partial_complete(Core *c, Contributions *k, Partial *p, int delivered) {
    if (!p->whole || !combinable(p)) return hand_over(c, k, p, 1);
    unlink_partial(k, p);
    PyObject *value = combined(c, p);
    int err = value ? partial_result(c, p, value, delivered) : -1;
    Py_XDECREF(value);
    partial_free(p);
    return err;
}

/* A child's partial `value` from PE `src` joins `p`: 0, or -1 (`p` complete and freed, or
 * error); `delivered`: it came in a message the core received. */
static int take_kid(Core *c, Contributions *k, Partial *p, uint32_t src, PyObject *value, int delivered) {
    PyObject *kid = Py_BuildValue("(IO)", (unsigned)src, value);
    if (!kid || PyList_Append(p->kids, kid) < 0) { Py_XDECREF(kid); return -1; }
    Py_DECREF(kid);
    if (p->rid == R_NOP && !p->first_value) p->first_value = Py_NewRef(value);
    return ++p->got >= p->expected ? partial_complete(c, k, p, delivered) : 0;
}

/* A child's partial of reduction `seq` of `coll` to `target` (a future, or an element's
 * entry method as `packed` says it travels) from PE `src`, with built-in reducer
 * `reducer`: taken into the Partial that waits for it, or into a new one where this PE's
 * part gathers here. 1 taken; 0 the manager's (nothing done); -1 error. */
static int take_child(Core *c, uint32_t src, uint64_t coll, uint32_t seq, PyObject *reducer, PyObject *target,
                      PyObject *packed, PyObject *value, int delivered) {
    Contributions *k = c->contributions;
    int rid = builtin_reducer(c->exchanges, reducer);
    if (!k || rid < 0 || rid == R_EXACT) return 0;
    Partial *p = partial_find(k, coll, seq);
    if (p) {
        if (!p->whole) return 0; /* the manager has the children's partials of this one */
        if (partial_check(k, p, target, reducer) < 0) return -1;
        return take_kid(c, k, p, src, value, delivered) < 0 ? -1 : 1;
    }
    PyObject *id = PyLong_FromUnsignedLongLong(coll);
    int group = 0;
    PyObject *cs = id ? gathering_state(c, id, &group) : NULL;
    Py_XDECREF(id);
    if (!cs) return PyErr_Occurred() ? -1 : 0;
    int held = manager_holds(k, coll, seq);
    if (held != 0) return held < 0 ? -1 : 0;
    Py_ssize_t count = PyLong_AsSsize_t(SLOT(cs, shoal_slots.state_count));
    if (count < 1) return PyErr_Occurred() ? -1 : 0;
    p = partial_new(k, coll, seq, rid, reducer, NULL, target, count, 1, SLOT(cs, shoal_slots.state_span), packed);
    return !p || take_kid(c, k, p, src, value, delivered) < 0 ? -1 : 1;
}

/* Whether item[0] .. item[n-1] are the n items of tuple `t`: 1, 0, -1 on error. */
static int same_items(PyObject *t, PyObject *item, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(t, i), PyTuple_GET_ITEM(item, i), Py_EQ);
        if (same <= 0) return same;
    }
    return 1;
}

/* A compact REDUCE of a child's partial (its entry field TO_FUTURE or TO_ENTRY + the
 * reducer's number; `item` its value: (owner, fid, partial) or (index, name, args,
 * partial)). 1 taken; 0 the Python path; -1 error. */
int contribution_deliver(Core *c, uint16_t entry, uint32_t src, uint32_t seq, uint64_t coll, PyObject *item) {
    Contributions *k = c->contributions;
    int to_entry = (entry & 0xFF00) == TO_ENTRY, rid = (int)entry - (to_entry ? TO_ENTRY : TO_FUTURE);
    Py_ssize_t n = to_entry ? 3 : 2; /* the target's part of the item */
    if (!k || !c->exchanges || rid < 0 || rid >= R_BUILTINS || rid == R_EXACT || !PyTuple_Check(item) || PyTuple_GET_SIZE(item) != n + 1)
        return 0;
    PyObject *reducer = exchange_reducer(c->exchanges, rid), *value = PyTuple_GET_ITEM(item, n);
    Partial *p = partial_find(k, coll, seq);
    if (p && p->whole && p->reducer == reducer && (to_entry ? p->packed != NULL : is_future(p->target))) {
        int same = 0; /* the common case: the Partial waits for it, no target made */
        if (to_entry) {
            same = same_items(p->packed, item, 3);
        } else {
            PyObject *owner = SLOT(p->target, shoal_slots.future_owner), *fid = SLOT(p->target, shoal_slots.future_fid);
            if (owner && fid) {
                same = PyObject_RichCompareBool(owner, PyTuple_GET_ITEM(item, 0), Py_EQ);
                if (same > 0) same = PyObject_RichCompareBool(fid, PyTuple_GET_ITEM(item, 1), Py_EQ);
            }
        }
        if (same < 0) return -1;
        if (same) return take_kid(c, k, p, src, value, 1) < 0 ? -1 : 1;
    }
    PyObject *packed = to_entry ? PyTuple_GetSlice(item, 0, 3) : NULL;
    PyObject *target = to_entry ? (packed ? PyObject_CallFunction(k->unpack_entry, "KO", (unsigned long long)coll, packed) : NULL)
                                : PyObject_CallFunctionObjArgs(k->handle, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), NULL);
    int r = target ? take_child(c, src, coll, seq, reducer, target, packed, value, 1) : -1;
    Py_XDECREF(target);
    Py_XDECREF(packed);
    return r;
}

/* contribution_offer(src, coll, seq, reducer, target, value) -> bool: a child's partial
 * that came the Python way (ReductionManager.receive), taken if the core gathers its
 * reduction here. */
PyObject *Core_contribution_offer(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "contribution_offer(src, coll, seq, reducer, target, value)");
        return NULL;
    }
    unsigned long src = PyLong_AsUnsignedLong(args[0]), seq = PyLong_AsUnsignedLong(args[2]);
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    PyObject *packed = NULL;
    int whole = c->contributions ? whole_target(c->contributions, coll, args[4], &packed) : 0;
    if (whole <= 0) {
        if (whole < 0) return NULL;
        Py_RETURN_FALSE;
    }
    int r = take_child(c, (uint32_t)src, coll, (uint32_t)seq, args[3], args[4], packed, args[5], 0);
    Py_XDECREF(packed);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
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

/* contributions_under_way() -> [(coll, seq, got, reducer, target)]: for deadlock reports and tests
 * (`got` counts this PE's elements' values and its children's partials). */
PyObject *Core_contributions_under_way(Core *c, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (Partial *p = c->contributions ? c->contributions->list : NULL; out && p; p = p->next) {
        PyObject *item = Py_BuildValue("(KInOO)", (unsigned long long)p->coll, (unsigned)p->seq, p->got, p->reducer, p->target);
        if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}
