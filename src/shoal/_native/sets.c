/* Receive sets, compiled (reference: shoal/runtime/receive_sets.py): posting a round of
 * receives, landing a message in its posted buffer (from the network, from this PE's
 * queue, or straight from a sender on this PE) and queueing `then()` when the last
 * one lands. Anything unusual (a message that is not one plain array, a buffer that
 * does not match it) goes back to the Python path, which takes it or reports it. */
#include "core.h"

/* The set's `then()` joins this PE's queue as the call Runtime._deliver_direct runs. 0 or -1. */
static int set_fire(Core *c, PyObject *set) {
    PyObject *item = SLOT(set, c->off_item);
    if (!item || !PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_SystemError, "ReceiveSet.item is not (None, body)");
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    if (!r) return -1;
    Py_DECREF(r);
    PyObject *coll = PyTuple_GET_ITEM(PyTuple_GET_ITEM(item, 1), 0);
    if (PyLong_AsLong(coll) != SYSTEM_ID) c->sent++;
    return 0;
}

/* Channel.arrive for a set's receive that just landed: the next sequence number, the
 * receive no longer pending, one fewer to go (and then() queued after the last). */
static int set_count(Core *c, PyObject *ch, PyObject *set, long arrived, long left) {
    PyObject *n = PyLong_FromLong((arrived + 1) & 0xFFFF), *l = PyLong_FromLong(left - 1);
    if (!n || !l) { Py_XDECREF(n); Py_XDECREF(l); return -1; }
    Py_XSETREF(SLOT(ch, c->off_arrived), n);
    Py_XSETREF(SLOT(ch, c->off_waiting), Py_NewRef(Py_None));
    Py_XSETREF(SLOT(ch, c->off_into), Py_NewRef(Py_None));
    Py_XSETREF(SLOT(set, c->off_remaining), l);
    if (left - 1 == 0 && set_fire(c, set) < 0) return -1;
    return 1;
}

/* The buffer `set` posted on `ch`, if it is a writable C-contiguous array (borrowed). */
static PyArrayObject *posted_buffer(Core *c, PyObject *ch, PyObject *set, long *arrived, long *left) {
    PyObject *into = SLOT(ch, c->off_into), *a = SLOT(ch, c->off_arrived), *r = SLOT(set, c->off_remaining);
    if (!into || !a || !r || !PyArray_Check(into) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)into) ||
        !PyArray_ISWRITEABLE((PyArrayObject *)into))
        return NULL;
    *arrived = PyLong_AsLong(a);
    *left = PyLong_AsLong(r);
    if (PyErr_Occurred()) { PyErr_Clear(); return NULL; }
    return (PyArrayObject *)into;
}

int set_land(Core *c, PyObject *ch, PyObject *set, const char *desc, Py_ssize_t dlen, const char *data,
             Py_ssize_t nbytes, Frames *frames) {
    long arrived, left;
    PyArrayObject *a = posted_buffer(c, ch, set, &arrived, &left);
    if (!a) return 0;
    char want[1 + 64], *p = want;
    *p++ = 1;
    if (!(p = describe(p, want + sizeof want, a)) || p - want != dlen || memcmp(want, desc, dlen) != 0 ||
        PyArray_NBYTES(a) != nbytes)
        return 0;
    memcpy(PyArray_DATA(a), data, nbytes);
    if (frames && frames_restart(frames)) return -1;
    return set_count(c, ch, set, arrived, left);
}

PyObject *channel_of(PyObject *el, uint32_t tag) {
    PyObject *table = PyObject_GetAttr(el, str_channels);
    if (!table) return NULL;
    PyObject *ch = NULL;
    if (PyDict_Check(table)) {
        PyObject *key = PyLong_FromUnsignedLong(tag);
        if (key) {
            ch = PyDict_GetItemWithError(table, key);
            Py_DECREF(key);
        }
    }
    Py_DECREF(table); /* the element keeps the table, and the table the channel */
    return ch;
}

/* Whether plain array `src` has the dtype and shape of buffer `a`. */
static int same_layout(PyArrayObject *a, PyArrayObject *src) {
    int nd = PyArray_NDIM(src);
    return PyArray_NDIM(a) == nd && PyArray_EquivTypes(PyArray_DESCR(a), PyArray_DESCR(src)) &&
           memcmp(PyArray_DIMS(a), PyArray_DIMS(src), nd * sizeof(npy_intp)) == 0;
}

int channel_now(Core *c, PyObject *ch, uint16_t seq, PyObject *array, int counted) {
    PyObject *waiting = SLOT(ch, c->off_waiting), *arrived = SLOT(ch, c->off_arrived), *inbox = SLOT(ch, c->off_inbox);
    if (!waiting || !arrived || !inbox) return 0;
    long next = PyLong_AsLong(arrived);
    if (next == -1 && PyErr_Occurred()) return -1;
    if (next != (long)seq) return 0; /* an earlier message is still on its way: keep the order */
    int r;
    Py_INCREF(ch);
    if (waiting == Py_None) {
        /* no receive pending: a copy joins the channel's inbox, as Channel.arrive would put it */
        PyObject *copy = copy_plain((PyArrayObject *)array), *n = PyLong_FromLong((next + 1) & 0xFFFF);
        PyObject *res = copy && n ? PyObject_CallMethodOneArg(inbox, str_append, copy) : NULL;
        r = res ? 1 : -1;
        Py_XDECREF(res);
        Py_XDECREF(copy);
        if (r > 0) Py_XSETREF(SLOT(ch, c->off_arrived), n);
        else Py_XDECREF(n);
    } else if (Py_TYPE(waiting) == (PyTypeObject *)c->set_cls) {
        /* a set's receive: straight into its buffer, if it is of the same dtype and shape */
        long arrived_, left;
        PyArrayObject *a = posted_buffer(c, ch, waiting, &arrived_, &left);
        r = 0;
        if (a && same_layout(a, (PyArrayObject *)array)) {
            memcpy(PyArray_DATA(a), PyArray_DATA((PyArrayObject *)array), PyArray_NBYTES(a));
            Py_INCREF(waiting);
            r = set_count(c, ch, waiting, arrived_, left);
            Py_DECREF(waiting);
        }
    } else {
        r = 0; /* a coroutine's receive: it resumes when the queue delivers the message */
    }
    Py_DECREF(ch);
    if (r > 0 && counted) { c->sent++; c->received++; }
    return r;
}

/* SetPost(core, set, fallback): what `set.post` is when the runtime has a compiled core.
 * It posts the round when no channel holds an early message and none has another
 * receive pending; anything else calls fallback(set), the Python post, which takes
 * early messages or raises. */
typedef struct {
    PyObject_HEAD
    Core *core;
    PyObject *set;
    PyObject *fallback;
    vectorcallfunc vectorcall;
} SetPost;

static int post_now(Core *c, PyObject *set) {
    PyObject *channels = SLOT(set, c->off_channels), *buffers = SLOT(set, c->off_buffers),
             *remaining = SLOT(set, c->off_remaining);
    if (active != c || !channels || !buffers || !remaining || !PyTuple_Check(channels) || !PyTuple_Check(buffers) ||
        PyTuple_GET_SIZE(channels) != PyTuple_GET_SIZE(buffers) || PyLong_AsLong(remaining) != 0)
        return 0;
    /* every channel free, and any message already in is a plain array that fits its buffer */
    Py_ssize_t n = PyTuple_GET_SIZE(channels), posted = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ch = PyTuple_GET_ITEM(channels, i), *waiting = SLOT(ch, c->off_waiting), *inbox = SLOT(ch, c->off_inbox);
        PyObject *buf = PyTuple_GET_ITEM(buffers, i);
        if (!waiting || waiting != Py_None || !inbox || !PyArray_Check(buf)) return 0;
        Py_ssize_t queued = PyObject_Length(inbox);
        if (queued < 0) return -1;
        if (queued == 0) continue;
        PyObject *head = PySequence_GetItem(inbox, 0);
        if (!head) return -1;
        int fits = PyArray_CheckExact(head) && same_layout((PyArrayObject *)buf, (PyArrayObject *)head);
        Py_DECREF(head);
        if (!fits) return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ch = PyTuple_GET_ITEM(channels, i), *buf = PyTuple_GET_ITEM(buffers, i), *inbox = SLOT(ch, c->off_inbox);
        if (PyObject_Length(inbox) > 0) { /* it came early: take it now */
            PyObject *head = PyObject_CallMethodNoArgs(inbox, str_popleft);
            if (!head) return -1;
            memcpy(PyArray_DATA((PyArrayObject *)buf), PyArray_DATA((PyArrayObject *)head), PyArray_NBYTES((PyArrayObject *)buf));
            Py_DECREF(head);
            continue;
        }
        Py_XSETREF(SLOT(ch, c->off_waiting), Py_NewRef(set));
        Py_XSETREF(SLOT(ch, c->off_into), Py_NewRef(buf));
        Py_XSETREF(SLOT(ch, c->off_landed), Py_NewRef(Py_False));
        posted++;
    }
    PyObject *left = PyLong_FromSsize_t(posted);
    if (!left) return -1;
    Py_XSETREF(SLOT(set, c->off_remaining), left);
    if (posted == 0 && set_fire(c, set) < 0) return -1;
    return 1;
}

static PyObject *set_post_call(SetPost *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) == 0 && kwnames == NULL) {
        int r = post_now(self->core, self->set);
        if (r < 0) return NULL;
        if (r) Py_RETURN_NONE;
    }
    PyObject *vec[MAX_ARGS + 2];
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > MAX_ARGS) {
        PyErr_SetString(PyExc_TypeError, "ReceiveSet.post() takes no arguments");
        return NULL;
    }
    vec[1] = self->set;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) vec[i + 2] = args[i];
    return PyObject_Vectorcall(self->fallback, vec + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
}

static int SetPost_init(SetPost *self, PyObject *args, PyObject *kw) {
    PyObject *core, *set, *fallback;
    if (!PyArg_ParseTuple(args, "O!OO", &CoreType, &core, &set, &fallback)) return -1;
    Py_INCREF(core); Py_XSETREF(self->core, (Core *)core);
    Py_INCREF(set); Py_XSETREF(self->set, set);
    Py_INCREF(fallback); Py_XSETREF(self->fallback, fallback);
    self->vectorcall = (vectorcallfunc)set_post_call;
    return 0;
}

static int SetPost_traverse(SetPost *self, visitproc visit, void *arg) {
    Py_VISIT(self->set);
    Py_VISIT(self->fallback);
    return 0;
}

static int SetPost_clear(SetPost *self) {
    Py_CLEAR(self->set);
    Py_CLEAR(self->fallback);
    return 0;
}

static void SetPost_dealloc(SetPost *self) {
    PyObject_GC_UnTrack(self);
    SetPost_clear(self);
    Py_XDECREF(self->core);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject SetPostType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.SetPost",
    .tp_basicsize = sizeof(SetPost),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "SetPost(core, set, fallback): a receive set's post(), compiled.",
    .tp_vectorcall_offset = offsetof(SetPost, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)SetPost_init,
    .tp_traverse = (traverseproc)SetPost_traverse,
    .tp_clear = (inquiry)SetPost_clear,
    .tp_dealloc = (destructor)SetPost_dealloc,
};

PyObject *Core_set_post(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "set_post(set, fallback)"); return NULL; }
    return PyObject_CallFunctionObjArgs((PyObject *)&SetPostType, (PyObject *)self, args[0], args[1], NULL);
}
