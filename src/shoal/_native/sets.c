/* Receive sets, compiled (reference: shoal/_runtime/receive_sets.py): posting a round of
 * receives, landing a message in its posted buffer (from the network, from this PE's
 * queue, or straight from a sender on this PE) and queueing `then()` when the last
 * one lands. Anything unusual (a message that is not one plain array, a buffer that
 * does not match it) goes back to the Python path, which takes it or reports it. */
#include "core.h"

/* The set's `then()` joins this PE's queue as the call Runtime._deliver_direct runs. 0 or -1. */
static int set_fire(Core *c, PyObject *set) {
    PyObject *item = SLOT(set, shoal_slots.set_item), *body = item && PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2
                                                    ? PyTuple_GET_ITEM(item, 1) : NULL;
    if (!body || !PyTuple_Check(body) || PyTuple_GET_SIZE(body) < 1) {
        PyErr_SetString(PyExc_SystemError, "ReceiveSet.item is not (None, (coll, ...))");
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    if (!r) return -1;
    Py_DECREF(r);
    if (!is_system(PyTuple_GET_ITEM(body, 0))) c->sent++;
    return 0;
}

/* Channel.arrive for a set's receive that just landed: the next sequence number, the
 * receive no longer pending, one fewer to go (and then() queued after the last). */
static int set_count(Core *c, PyObject *ch, PyObject *set, long arrived, long left) {
    PyObject *n = PyLong_FromLong((arrived + 1) & SEQ_MASK), *l = PyLong_FromLong(left - 1);
    if (!n || !l) { Py_XDECREF(n); Py_XDECREF(l); return -1; }
    Py_XSETREF(SLOT(ch, shoal_slots.channel_arrived), n);
    Py_XSETREF(SLOT(ch, shoal_slots.channel_waiting), Py_NewRef(Py_None));
    Py_XSETREF(SLOT(ch, shoal_slots.channel_into), Py_NewRef(Py_None));
    Py_XSETREF(SLOT(set, shoal_slots.set_remaining), l);
    if (left - 1 == 0 && set_fire(c, set) < 0) return -1;
    return 1;
}

/* The buffer `set` posted on `ch`, if it is a writable array (borrowed): C-contiguous, or
 * a strided view (a column face) that fill_array unpacks into. */
static PyArrayObject *posted_buffer(Core *c, PyObject *ch, PyObject *set, long *arrived, long *left) {
    PyObject *into = SLOT(ch, shoal_slots.channel_into), *a = SLOT(ch, shoal_slots.channel_arrived), *r = SLOT(set, shoal_slots.set_remaining);
    if (!into || !a || !r || !is_array(into) || !PyArray_ISWRITEABLE((PyArrayObject *)into))
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
    if (fill_array(a, data) < 0) return -1;
    if (frames && frames_restart(frames)) return -1;
    return set_count(c, ch, set, arrived, left);
}

PyObject *channel_of(PyObject *el, uint32_t tag) {
    PyObject *table = PyObject_GetAttr(el, shoal_names.channels);
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

int inbox_push(Core *c, PyObject *ch, PyObject *array) {
    PyObject *arrived = SLOT(ch, shoal_slots.channel_arrived), *inbox = SLOT(ch, shoal_slots.channel_inbox);
    long next = arrived ? PyLong_AsLong(arrived) : -1;
    if (next == -1 || !inbox) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "a channel without arrived or inbox");
        return -1;
    }
    PyObject *n = PyLong_FromLong((next + 1) & SEQ_MASK), *res = n ? PyObject_CallMethodOneArg(inbox, shoal_names.append, array) : NULL;
    if (!res) { Py_XDECREF(n); return -1; }
    Py_DECREF(res);
    Py_XSETREF(SLOT(ch, shoal_slots.channel_arrived), n);
    return 1;
}

/* Whether plain array `src` has the dtype and shape of buffer `a`. */
static int same_layout(PyArrayObject *a, PyArrayObject *src) {
    int nd = PyArray_NDIM(src);
    return PyArray_NDIM(a) == nd && PyArray_EquivTypes(PyArray_DESCR(a), PyArray_DESCR(src)) &&
           memcmp(PyArray_DIMS(a), PyArray_DIMS(src), nd * sizeof(npy_intp)) == 0;
}

int channel_in_order(Core *c, PyObject *ch, uint16_t seq) {
    PyObject *arrived = SLOT(ch, shoal_slots.channel_arrived), *ahead = SLOT(ch, shoal_slots.channel_ahead);
    if (!arrived || ahead != Py_None) return 0;
    long next = PyLong_AsLong(arrived);
    if (next == -1 && PyErr_Occurred()) return -1;
    return next == (long)seq;
}

int channel_now(Core *c, PyObject *ch, uint16_t seq, PyObject *array, int counted) {
    PyObject *waiting = SLOT(ch, shoal_slots.channel_waiting), *inbox = SLOT(ch, shoal_slots.channel_inbox);
    if (!waiting || !inbox) return 0;
    int r = channel_in_order(c, ch, seq);
    if (r <= 0) return r; /* an earlier message is still on its way: keep the order */
    Py_INCREF(ch);
    if (waiting == Py_None) { /* no receive pending: a copy joins the channel's inbox */
        PyObject *copy = copy_plain((PyArrayObject *)array);
        r = copy ? inbox_push(c, ch, copy) : -1;
        Py_XDECREF(copy);
    } else if (Py_TYPE(waiting) == (PyTypeObject *)c->set_cls) {
        /* a set's receive: straight into its buffer, if it is of the same dtype and shape */
        long arrived_, left;
        PyArrayObject *a = posted_buffer(c, ch, waiting, &arrived_, &left);
        r = 0;
        if (a && same_layout(a, (PyArrayObject *)array)) {
            if (fill_array(a, PyArray_DATA((PyArrayObject *)array)) < 0) {
                r = -1;
            } else {
                Py_INCREF(waiting);
                r = set_count(c, ch, waiting, arrived_, left);
                Py_DECREF(waiting);
            }
        }
    } else {
        r = 0; /* a coroutine's receive: it resumes when the queue delivers the message */
    }
    Py_DECREF(ch);
    if (r > 0 && counted) { c->sent++; c->received++; }
    return r;
}

/* `set.post()`, compiled: the round is posted here when no channel holds an early
 * message that is not one plain array of its buffer's layout and none has another
 * receive pending. 1 posted; 0 not handled (ReceiveSet._post, the Python path, takes
 * early messages or raises); -1 error. */
static int post_now(Core *c, PyObject *set, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *channels = SLOT(set, shoal_slots.set_channels), *buffers = SLOT(set, shoal_slots.set_buffers),
             *remaining = SLOT(set, shoal_slots.set_remaining);
    if (nargs != 0 || !channels || !buffers || !remaining || !PyTuple_Check(channels) || !PyTuple_Check(buffers) ||
        PyTuple_GET_SIZE(channels) != PyTuple_GET_SIZE(buffers))
        return 0;
    long pending = PyLong_AsLong(remaining);
    if (pending == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; } /* not an int: for the Python path */
    if (pending != 0) return 0; /* a round still pending: ReceiveSet._post raises */
    /* every channel free, and any message already in is a plain array that fits its buffer */
    Py_ssize_t n = PyTuple_GET_SIZE(channels), posted = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ch = PyTuple_GET_ITEM(channels, i), *waiting = SLOT(ch, shoal_slots.channel_waiting), *inbox = SLOT(ch, shoal_slots.channel_inbox);
        PyObject *buf = PyTuple_GET_ITEM(buffers, i);
        if (!waiting || waiting != Py_None || !inbox || !is_array(buf)) return 0;
        Py_ssize_t queued = PyObject_Length(inbox);
        if (queued < 0) return -1;
        if (queued == 0) continue;
        PyObject *head = PySequence_GetItem(inbox, 0);
        if (!head) return -1;
        int fits = is_exact_array(head) && same_layout((PyArrayObject *)buf, (PyArrayObject *)head);
        Py_DECREF(head);
        if (!fits) return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ch = PyTuple_GET_ITEM(channels, i), *buf = PyTuple_GET_ITEM(buffers, i), *inbox = SLOT(ch, shoal_slots.channel_inbox);
        Py_ssize_t queued = PyObject_Length(inbox);
        if (queued < 0) return -1;
        if (queued > 0) { /* it came early: take it now */
            PyObject *head = PyObject_CallMethodNoArgs(inbox, shoal_names.popleft);
            if (!head) return -1;
            int filled = fill_array((PyArrayObject *)buf, PyArray_DATA((PyArrayObject *)head)); /* inbox arrays are C-ordered */
            Py_DECREF(head);
            if (filled < 0) return -1;
            continue;
        }
        Py_XSETREF(SLOT(ch, shoal_slots.channel_waiting), Py_NewRef(set));
        Py_XSETREF(SLOT(ch, shoal_slots.channel_into), Py_NewRef(buf));
        Py_XSETREF(SLOT(ch, shoal_slots.channel_landed), Py_NewRef(Py_False));
        posted++;
    }
    PyObject *left = PyLong_FromSsize_t(posted);
    if (!left) return -1;
    Py_XSETREF(SLOT(set, shoal_slots.set_remaining), left);
    if (posted == 0 && set_fire(c, set) < 0) return -1;
    return 1;
}

PyObject *Core_set_post(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "set_post(set, fallback)"); return NULL; }
    return compiled_method(self, args[0], args[1], post_now);
}
