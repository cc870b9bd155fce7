/* Channel messages received, compiled (reference: Channel.arrive and
 * Runtime._on_channel in shoal/_runtime): a message completes the pending receive (into
 * the buffer it posted, if any), lands in a receive set's buffer (sets.c), or joins the
 * channel's inbox. Messages from the network (receive.c) and from this PE's own queue
 * come here alike. */
#include "core.h"

/* A channel message for element `el`: its values complete the pending receive (into
 * the posted array, if the receive posted one that matches; a receive set's goes to
 * sets.c), or, with no receive pending, one plain array joins the channel's inbox.
 * 1 done; 0 for the Python path (anything else, a mismatch: it queues or reports);
 * -1 error. */
int channel_deliver(Core *c, PyObject *el, uint8_t kind, uint16_t seq, uint32_t tag, uint64_t coll,
                    const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, Frames *frames) {
    /* `frames` NULL: a message from this PE's local queue (no receive buffer to restart) */
    PyObject *table = PyObject_GetAttr(el, shoal_names.channels);
    if (!table) return -1;
    PyObject *ch = NULL;
    if (PyDict_Check(table)) {
        PyObject *key = PyLong_FromUnsignedLong(tag);
        if (!key) { Py_DECREF(table); return -1; }
        ch = PyDict_GetItemWithError(table, key);
        Py_DECREF(key);
        Py_XINCREF(ch);
    }
    Py_DECREF(table);
    if (!ch) return PyErr_Occurred() ? -1 : 0;
    int r = channel_in_order(c, ch, seq);
    if (r <= 0) goto done; /* it overtook an earlier message: Channel.arrive keeps it until that one comes */
    r = 0;
    PyObject *fut = SLOT(ch, shoal_slots.channel_waiting), *into = SLOT(ch, shoal_slots.channel_into), *arrived = SLOT(ch, shoal_slots.channel_arrived);
    if (fut && Py_TYPE(fut) == (PyTypeObject *)c->set_cls) { /* a receive set's: land it in the posted buffer */
        if ((kind & KIND_ARRAYS) && nseg == 2) {
            Py_INCREF(fut);
            r = set_land(c, ch, fut, segs[0], lens[0], segs[1], lens[1], frames);
            Py_DECREF(fut);
            if (r > 0 && coll != SYSTEM_ID) c->received++;
        }
        goto done;
    }
    if (fut == Py_None && (kind & KIND_ARRAYS) && nseg == 2) {
        /* no receive pending: the array, rebuilt, joins the channel's inbox */
        PyObject *values = rebuild_arrays(c, segs[0], lens[0], segs + 1, lens + 1, 1);
        if (!values) { r = PyErr_Occurred() ? -1 : 0; goto done; }
        r = inbox_push(c, ch, PyTuple_GET_ITEM(values, 0));
        Py_DECREF(values);
        if (r > 0 && frames && frames_restart(frames)) r = -1;
        if (r > 0 && coll != SYSTEM_ID) c->received++;
        goto done;
    }
    /* a pending receive of a local future (fid 0) that nothing resolved yet; anything
     * else, or a slot that does not read as it should, is for the Python path */
    if (!(fut && fut != Py_None && into && arrived && SLOT(fut, shoal_slots.future_fid) && PyLong_AsLong(SLOT(fut, shoal_slots.future_fid)) == 0 &&
          future_pending(c, fut) > 0)) {
        PyErr_Clear(); /* also when one of those reads failed */
        goto done;
    }
    Py_INCREF(fut); /* the channel's reference to it goes below, and unpickling runs Python code */
    PyObject *value;
    if (into != Py_None) {
        /* one array of exactly the posted layout: copy it from the frame into place
         * (a strided buffer, a column face, by NumPy's strided copy) */
        if (!(kind & KIND_ARRAYS) || nseg != 2 || !is_array(into)) goto release;
        PyArrayObject *a = (PyArrayObject *)into;
        char want[1 + 64], *p = want;
        *p++ = 1;
        if (!(p = describe(p, want + sizeof want, a)) || p - want != lens[0] || memcmp(want, segs[0], lens[0]) != 0 ||
            PyArray_NBYTES(a) != lens[1] || !PyArray_ISWRITEABLE(a))
            goto release;
        if (fill_array(a, segs[1]) < 0) { r = -1; goto release; }
        Py_INCREF(into);
        value = into;
    } else {
        PyObject *values = decode_args(c, kind, segs, lens, nseg);
        if (!values) goto release;
        if (PyTuple_GET_SIZE(values) == 1) {
            value = PyTuple_GET_ITEM(values, 0);
            Py_INCREF(value);
            Py_DECREF(values);
        } else {
            value = values;
        }
    }
    if (frames && frames_restart(frames)) { Py_DECREF(value); r = -1; goto release; }
    if (coll != SYSTEM_ID) c->received++;
    /* Channel.arrive + Future._resolve: the next sequence number, the value, the callbacks */
    PyObject *next = PyLong_FromLong((seq + 1) & SEQ_MASK);
    if (!next) { Py_DECREF(value); r = -1; goto release; }
    Py_XSETREF(SLOT(ch, shoal_slots.channel_arrived), next);
    Py_INCREF(Py_None);
    Py_XSETREF(SLOT(ch, shoal_slots.channel_waiting), Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(SLOT(ch, shoal_slots.channel_into), Py_None);
    Py_XSETREF(SLOT(fut, shoal_slots.future_value), value);
    future_set_done(c, fut);
    PyObject *callbacks = SLOT(fut, shoal_slots.future_callbacks);
    r = 1;
    if (callbacks && callbacks != Py_None) {
        SLOT(fut, shoal_slots.future_callbacks) = Py_None;
        Py_INCREF(Py_None);
        if (PyList_Check(callbacks)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(callbacks) && r > 0; i++) {
                PyObject *res = PyObject_CallOneArg(PyList_GET_ITEM(callbacks, i), fut);
                if (!res) r = -1; else Py_DECREF(res);
            }
        }
        Py_DECREF(callbacks);
    }
release:
    Py_DECREF(fut);
done:
    Py_DECREF(ch);
    return r;
}

/* A queued channel message of one array between elements of this PE (send.c,
 * send_local_channel): completed here like one from the network. 1 done; 0 Python path. */
int local_channel(Core *c, PyObject *header, PyObject *body) {
    if (!PyBytes_Check(header) || PyBytes_GET_SIZE(header) < HSIZE || !PyList_Check(body) || PyList_GET_SIZE(body) != 2)
        return 0;
    const unsigned char *h = (const unsigned char *)PyBytes_AS_STRING(header);
    uint8_t kind = h[H_KIND], nidx = h[H_RANK];
    if ((kind & KIND_MASK) != KIND_CHANNEL || !(kind & KIND_ARRAYS) || nidx > MAX_INDEX ||
        PyBytes_GET_SIZE(header) != HSIZE + 8 * nidx)
        return 0;
    PyObject *desc = PyList_GET_ITEM(body, 0), *data = PyList_GET_ITEM(body, 1);
    if (!PyBytes_Check(desc) || !is_array(data) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)data)) return 0;
    uint16_t seq;
    uint32_t tag;
    uint64_t coll;
    memcpy(&seq, h + H_ENTRY, 2);
    memcpy(&tag, h + H_AUX, 4);
    memcpy(&coll, h + H_COLL, 8);
    PyObject *el = element_at(c, coll, h + HSIZE, nidx);
    if (!el) return PyErr_Occurred() ? -1 : 0;
    const char *segs[2] = {PyBytes_AS_STRING(desc), PyArray_DATA((PyArrayObject *)data)};
    Py_ssize_t lens[2] = {PyBytes_GET_SIZE(desc), PyArray_NBYTES((PyArrayObject *)data)};
    Py_INCREF(el);
    int r = channel_deliver(c, el, kind, seq, tag, coll, segs, lens, 2, NULL);
    Py_DECREF(el);
    return r;
}

/* `channel.recv(into=None)`, compiled (Channel._recv is the reference): with no receive
 * pending, nothing in the inbox and `into` None or the buffer the last receive posted
 * (checked then), the pending receive is a new ChannelFuture of `cls`. Anything else
 * (a buffer to check, a message waiting, an error to raise) is the Python path's. */
static PyObject *channel_recv_fast(Core *c, PyObject *ch, PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
    PyObject *into = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1) return NULL;
    if (nargs == 1) {
        into = args[0];
    } else if (nkw == 1) {
        if (!keyword_is(PyTuple_GET_ITEM(kwnames, 0), "into")) return NULL;
        into = args[0];
    }
    PyObject *waiting = SLOT(ch, shoal_slots.channel_waiting), *inbox = SLOT(ch, shoal_slots.channel_inbox);
    if (waiting != Py_None || !inbox || (into != Py_None && into != SLOT(ch, shoal_slots.channel_checked))) return NULL;
    Py_ssize_t queued = PyObject_Length(inbox);
    if (queued != 0) {
        if (queued < 0) PyErr_Clear();
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *fut = type->tp_alloc(type, 0);
    PyObject *owner = fut ? PyLong_FromUnsignedLong(c->pe) : NULL, *fid = owner ? PyLong_FromLong(0) : NULL;
    if (!fid) { Py_XDECREF(owner); Py_XDECREF(fut); return NULL; }
    SLOT(fut, shoal_slots.future_rt) = Py_NewRef(c->rt);
    SLOT(fut, shoal_slots.future_owner) = owner;
    SLOT(fut, shoal_slots.future_fid) = fid;
    future_set_pending(c, fut);
    SLOT(fut, shoal_slots.future_value) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_callbacks) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_origin) = Py_NewRef(ch);
    Py_XSETREF(SLOT(ch, shoal_slots.channel_waiting), Py_NewRef(fut));
    Py_XSETREF(SLOT(ch, shoal_slots.channel_into), Py_NewRef(into));
    Py_XSETREF(SLOT(ch, shoal_slots.channel_landed), Py_NewRef(Py_False));
    return fut;
}

PyObject *Core_channel_recv(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "channel_recv(channel, fallback, future_class)");
        return NULL;
    }
    return compiled_value_method(self, args[0], args[1], channel_recv_fast, args[2]);
}
