/* Where a complete Partial's value goes (reference: ReductionManager._maybe_done and
 * deliver in shoal/_runtime/reductions.py): up the collection's tree to the parent PE as
 * a compact REDUCE message, or at the root to the reduction's future or entry method.
 *
 * An entry-method target at the root is an element of the collection. When a message the
 * core received completed the reduction and the element is here, the core runs the entry
 * method at once, as it runs a received call (receive.c): the Python path would send the
 * value to the element as a local call, pickled, queued and unpickled. It does so only for
 * a value no element still holds (a number, a str, a fresh array; a gather's list with
 * its arrays copied), since a local call gives its receiver a copy. A gather's partials travel as
 * tuples of (index, value) pairs in index order; its result is their values. */
#include "partials.h"

static int immutable(PyObject *value) {
    return value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) ||
           PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) || PyBytes_CheckExact(value);
}

/* `value`, the result of `p`, as nobody else's (a new reference): itself if immutable or
 * an array that is none of this PE's elements' own values (a combination makes a fresh
 * one); a gather's list with its plain arrays copied (as a local call's pickle would);
 * NULL (no error) if neither. */
static PyObject *unshared(Partial *p, PyObject *value) {
    if (immutable(value)) return Py_NewRef(value);
    if (p->rid == R_GATHER) {
        Py_ssize_t n = PyList_GET_SIZE(value);
        PyObject *out = PyList_New(n);
        for (Py_ssize_t i = 0; out && i < n; i++) {
            PyObject *v = PyList_GET_ITEM(value, i);
            PyObject *mine = immutable(v) ? Py_NewRef(v) : plain_array(v) ? copy_plain((PyArrayObject *)v) : NULL;
            if (!mine) Py_CLEAR(out);
            else PyList_SET_ITEM(out, i, mine);
        }
        return out;
    }
    if (!is_exact_array(value) || value == p->first_value) return NULL;
    for (Py_ssize_t i = 0; p->values && i < PyList_GET_SIZE(p->values); i++)
        if (PyList_GET_ITEM(p->values, i) == value) return NULL;
    return Py_NewRef(value);
}

/* Entry method `name` of element `el`: its class's function if `name` is one of its entry
 * methods (a new reference), else NULL with no error. */
static PyObject *entry_named(PyObject *el, PyObject *name) {
    PyObject *fn = PyObject_GetAttr((PyObject *)Py_TYPE(el), name);
    if (!fn) { PyErr_Clear(); return NULL; }
    PyObject *funcs = _PyType_Lookup(Py_TYPE(el), shoal_names.funcs); /* borrowed */
    for (Py_ssize_t i = 0; funcs && PyTuple_Check(funcs) && i < PyTuple_GET_SIZE(funcs); i++)
        if (PyTuple_GET_ITEM(funcs, i) == fn) return fn;
    Py_DECREF(fn);
    return NULL;
}

/* At the root, the entry method `p->packed` names run on its element here with `value`
 * after its leading arguments, as a received call runs. 1 ran; 0 not (the element is not
 * here or takes no message now, the value is an element's own, or the name is not an
 * entry method: the proxy call then); -1 error. */
static int run_at_root(Core *c, Partial *p, PyObject *value) {
    PyObject *index = PyTuple_GET_ITEM(p->packed, 0), *name = PyTuple_GET_ITEM(p->packed, 1);
    PyObject *lead = PyTuple_GET_ITEM(p->packed, 2);
    if (!PyTuple_Check(index) || !PyTuple_Check(lead)) return 0;
    PyObject *el = element_of(c, p->coll, index); /* borrowed; NULL if held for a move */
    if (!el) return PyErr_Occurred() ? -1 : 0;
    PyObject *fn = entry_named(el, name);
    if (!fn) return 0;
    PyObject *mine = unshared(p, value);
    if (!mine) {
        Py_DECREF(fn);
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(lead);
    PyObject *args = PyTuple_New(n + 1);
    if (!args) { Py_DECREF(fn); Py_DECREF(mine); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(args, i, Py_NewRef(PyTuple_GET_ITEM(lead, i)));
    PyTuple_SET_ITEM(args, n, mine);
    Py_INCREF(el);
    int err = run_entry(c, el, fn, args, NULL, 0, 0);
    Py_DECREF(el);
    Py_DECREF(fn);
    Py_DECREF(args);
    return err < 0 ? -1 : 1;
}

/* Up the tree: (owner, fid, value) or (index, name, args, value) to the parent. 0 or -1. */
static int send_up(Core *c, Partial *p, PyObject *value) {
    PyObject *packed = p->packed, *item;
    int code = (packed ? TO_ENTRY : TO_FUTURE) + p->rid;
    if (packed) {
        item = PyTuple_Pack(4, PyTuple_GET_ITEM(packed, 0), PyTuple_GET_ITEM(packed, 1), PyTuple_GET_ITEM(packed, 2), value);
    } else {
        PyObject *owner = SLOT(p->target, shoal_slots.future_owner), *fid = SLOT(p->target, shoal_slots.future_fid);
        item = owner && fid ? PyTuple_Pack(3, owner, fid, value) : NULL;
    }
    int sent = item ? send_to(c, p->parent, KIND_REDUCE, (uint16_t)code, p->seq, p->coll, NULL, 0, &item, 1) : -1;
    if (sent == 0) { /* not one frame of the compiled path: Runtime.post_value */
        PyObject *r = PyObject_CallMethod(c->rt, "post_value", "liiIKO", p->parent, KIND_REDUCE, code,
                                          p->seq, (unsigned long long)p->coll, item);
        sent = r ? 1 : -1;
        Py_XDECREF(r);
    }
    Py_XDECREF(item);
    return sent < 0 ? -1 : 0;
}

/* At the root, to the future: resolved here, or Future.send. 0 or -1. */
static int resolve(Core *c, Partial *p, PyObject *value) {
    PyObject *owner = SLOT(p->target, shoal_slots.future_owner), *fid = SLOT(p->target, shoal_slots.future_fid);
    if (!owner || !fid) return -1;
    long pe = PyLong_AsLong(owner), number = PyLong_AsLong(fid);
    int here = PyErr_Occurred() ? -1 : pe == (long)c->pe ? resolve_here(c, (uint32_t)number, value) : 0;
    PyObject *r = here < 0 ? NULL : here ? Py_NewRef(Py_None)
                : pe == (long)c->pe ? PyObject_CallMethodOneArg(p->target, shoal_names.send, value)
                : PyObject_CallFunctionObjArgs(c->send_future, owner, fid, value, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* A gather's result: the values of its (index, value) pairs, in their order (a new list). */
static PyObject *values_of(PyObject *pairs) {
    Py_ssize_t n = PyTuple_GET_SIZE(pairs);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        PyObject *v = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 ? Py_NewRef(PyTuple_GET_ITEM(pair, 1))
                                                                         : PySequence_GetItem(pair, 1);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

int partial_result(Core *c, Partial *p, PyObject *value, int delivered) {
    if (p->parent >= 0) return send_up(c, p, value);
    PyObject *result = p->rid == R_GATHER ? values_of(value) : Py_NewRef(value);
    if (!result) return -1;
    int ran = !p->packed ? -2 : delivered ? run_at_root(c, p, result) : 0, err;
    if (ran == -2) {
        err = resolve(c, p, result);
    } else if (ran) {
        err = ran < 0 ? -1 : 0;
    } else { /* the proxy call, as the Python path's deliver makes */
        PyObject *r = PyObject_CallOneArg(p->target, result);
        Py_XDECREF(r);
        err = r ? 0 : -1;
    }
    Py_DECREF(result);
    return err;
}
