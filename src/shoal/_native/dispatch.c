/* The runtime's per-message paths, compiled: shoal/runtime/scheduler.py is the reference.
 *
 * Send: an entry-method call without keywords or reply, to an element whose PE the
 * proxy has cached and which is on another PE, is encoded (plain NumPy arrays as a
 * descriptor plus their memory, anything else by shoal's pickler), given its header
 * and sent as one eager frame, without entering Python.
 *
 * Receive: an eager frame that calls an entry method without reply, on an element
 * that is here, becomes the call itself: arrays are rebuilt in fresh memory straight
 * from the receive buffer, other arguments unpickled, the method called; a coroutine
 * it returns goes to the runtime's task driver, an exception to its error handler.
 *
 * The per-PE counters of quiescence detection and the entry-call depth live here, so
 * both paths share them: the Python runtime reads and writes them as `rt.counts`.
 */
#include "native.h"
#include <structmember.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shoal_ARRAY_API
#include <numpy/arrayobject.h>

/* the wire header (runtime/message.py): <BBHIIQ kind, index rank, entry, source, aux, collection */
#define HSIZE 20
#define MAX_INDEX 8
#define MAX_ARGS 16
#define KIND_ARRAYS 0x40
#define KIND_KWARGS 0x80
#define KIND_MASK 0x3F
#define SYSTEM_ID 0
#define KIND_REDUCE 4
#define KIND_RESULT 5
#define KIND_CHANNEL 8
#define KIND_EXCHANGE 10

struct Core {
    PyObject_HEAD
    Frames *frames;
    PyObject *rt;          /* the Runtime this core serves */
    PyObject *locations;   /* rt.locations: its `epoch` says whether a proxy's cached PE holds */
    PyObject *colls;       /* rt.colls: collection id -> CollectionState */
    PyObject *start_task;  /* rt._start_task(el, fn, coroutine, None) */
    PyObject *failed;      /* rt._entry_failed(el, fn, exc, None) */
    PyObject *encode;      /* message.encode(args) -> segments */
    PyObject *loads;       /* pickle.loads */
    PyObject *layouts;     /* message._layouts: array descriptor -> ((dtype, shape), ...) */
    PyObject *layout;      /* message._layout(descriptor), on a cache miss */
    PyObject *slow_send;   /* transport.send(dest, header, segments): rendezvous-sized messages */
    PyObject *local_append; /* rt.local.append: messages to elements of this PE */
    PyObject *local_popleft; /* rt.local.popleft */
    PyObject *local;         /* rt.local */
    PyObject *on_value;      /* rt._on_value(kind, entry, aux, coll, value): reduction messages */
    Py_ssize_t off_info, off_index, off_dest, off_epoch, off_packed; /* ElementProxy slots */
    Py_ssize_t off_loc_epoch, off_info_id, off_elements;            /* Locations, CollectionInfo, CollectionState */
    Py_ssize_t off_waiting, off_into, off_arrived, off_sent, off_tag, off_remote; /* Channel slots */
    Py_ssize_t off_state, off_value, off_callbacks, off_fid;         /* Future slots */
    uint32_t pe;
    long long sent, received, depth;
};

static Core *active = NULL; /* the core of the runtime in this process (one MPI PE per process) */
static PyObject *str_funcs, *str_channels;

Core *core_for(PyObject *rt) {
    return active != NULL && active->rt == rt ? active : NULL;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* The offset of slot `name` of class `cls` (a __slots__ member descriptor). */
static Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (!d) return -1;
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) off = ((PyMemberDescrObject *)d)->d_member->offset;
    else PyErr_Format(PyExc_TypeError, "%R.%s is not a __slots__ member", cls, name);
    Py_DECREF(d);
    return off;
}

static int Core_init(Core *self, PyObject *args, PyObject *kw) {
    PyObject *frames, *rt, *proxy_cls, *locations_cls, *info_cls, *state_cls, *channel_cls, *future_cls;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOOOOOOOOO", &FramesType, &frames, &rt, &self->locations, &self->colls,
                          &self->start_task, &self->failed, &self->encode, &self->loads, &self->layouts,
                          &self->layout, &self->slow_send, &proxy_cls, &locations_cls, &info_cls, &state_cls,
                          &channel_cls, &future_cls))
        return -1;
    PyObject **refs[] = {&self->locations, &self->colls, &self->start_task, &self->failed, &self->encode,
                         &self->loads, &self->layouts, &self->layout, &self->slow_send};
    PyObject *local = PyObject_GetAttrString(rt, "local");
    if (!local) return -1;
    self->local = local;
    if (!(self->on_value = PyObject_GetAttrString(rt, "_on_value"))) return -1;
    self->local_append = PyObject_GetAttrString(local, "append");
    self->local_popleft = PyObject_GetAttrString(local, "popleft");
    if (!self->local_append || !self->local_popleft) return -1;
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) Py_INCREF(*refs[i]);
    if (!PyDict_Check(self->colls) || !PyDict_Check(self->layouts)) {
        PyErr_SetString(PyExc_TypeError, "colls and layouts must be dicts");
        return -1;
    }
    Py_INCREF(frames);
    Py_INCREF(rt);
    self->frames = (Frames *)frames;
    self->rt = rt;
    PyObject *pe = PyObject_GetAttrString(rt, "pe");
    if (!pe) return -1;
    self->pe = (uint32_t)PyLong_AsUnsignedLong(pe);
    Py_DECREF(pe);
    if (PyErr_Occurred()) return -1;
    if ((self->off_info = slot_offset(proxy_cls, "_info")) < 0 || (self->off_index = slot_offset(proxy_cls, "_index")) < 0 ||
        (self->off_dest = slot_offset(proxy_cls, "_dest")) < 0 || (self->off_epoch = slot_offset(proxy_cls, "_epoch")) < 0 ||
        (self->off_packed = slot_offset(proxy_cls, "_packed")) < 0 ||
        (self->off_loc_epoch = slot_offset(locations_cls, "epoch")) < 0 ||
        (self->off_info_id = slot_offset(info_cls, "id")) < 0 || (self->off_elements = slot_offset(state_cls, "elements")) < 0 ||
        (self->off_waiting = slot_offset(channel_cls, "waiting")) < 0 || (self->off_into = slot_offset(channel_cls, "into")) < 0 ||
        (self->off_arrived = slot_offset(channel_cls, "arrived")) < 0 || (self->off_sent = slot_offset(channel_cls, "sent")) < 0 ||
        (self->off_tag = slot_offset(channel_cls, "tag")) < 0 || (self->off_remote = slot_offset(channel_cls, "remote")) < 0 || (self->off_state = slot_offset(future_cls, "_state")) < 0 ||
        (self->off_value = slot_offset(future_cls, "_value")) < 0 || (self->off_callbacks = slot_offset(future_cls, "_callbacks")) < 0 ||
        (self->off_fid = slot_offset(future_cls, "fid")) < 0)
        return -1;
    self->frames->core = self;
    active = self;
    return 0;
}

/* detach(): stop serving (the transport is closing). */
static PyObject *Core_detach(Core *self, PyObject *unused) {
    if (self->frames && self->frames->core == self) self->frames->core = NULL;
    if (active == self) active = NULL;
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *self) {
    Core_detach(self, NULL);
    Py_XDECREF(self->frames);
    Py_XDECREF(self->rt);
    Py_XDECREF(self->locations);
    Py_XDECREF(self->colls);
    Py_XDECREF(self->start_task);
    Py_XDECREF(self->failed);
    Py_XDECREF(self->encode);
    Py_XDECREF(self->loads);
    Py_XDECREF(self->layouts);
    Py_XDECREF(self->layout);
    Py_XDECREF(self->slow_send);
    Py_XDECREF(self->local_append);
    Py_XDECREF(self->local_popleft);
    Py_XDECREF(self->local);
    Py_XDECREF(self->on_value);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* -- sending ------------------------------------------------------------------ */

/* Append the descriptor of array `a` (runtime/message.py _describe) at `p`; the new end, or NULL. */
static char *describe(char *p, char *end, PyArrayObject *a) {
    PyArray_Descr *d = PyArray_DESCR(a);
    int nd = PyArray_NDIM(a);
    char code[24];
    char order = d->byteorder == '=' ? '<' : d->byteorder;
    int clen = snprintf(code, sizeof code, "%c%c%lld", order, d->kind, (long long)PyArray_ITEMSIZE(a));
    if (clen <= 0 || clen >= (int)sizeof code || p + 2 + clen + 8 * nd > end) return NULL;
    *p++ = (char)clen;
    memcpy(p, code, clen);
    p += clen;
    *p++ = (char)nd;
    for (int i = 0; i < nd; i++) {
        int64_t n = PyArray_DIMS(a)[i];
        memcpy(p, &n, 8);
        p += 8;
    }
    return p;
}

static int plain_array(PyObject *o) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    char k = PyArray_DESCR(a)->kind;
    return (k == 'b' || k == 'i' || k == 'u' || k == 'f' || k == 'c') && PyArray_IS_C_CONTIGUOUS(a);
}

/* Hand a message the eager path cannot take to the Python transport (rendezvous). */
static int send_slow(Core *c, long dest, const char *header, Py_ssize_t hlen, PyObject *segments) {
    PyObject *h = PyBytes_FromStringAndSize(header, hlen);
    if (!h) return -1;
    PyObject *r = PyObject_CallFunction(c->slow_send, "lOO", dest, h, segments);
    Py_DECREF(h);
    if (!r) return -1;
    Py_DECREF(r);
    return 1;
}

/* A call of an element on this PE whose arguments are all plain arrays: copies of them
 * join the runtime's local queue as (None, (collection, index, entry, copies)), which
 * Runtime._deliver_direct runs (the same as Runtime.invoke does). 0 for anything else. */
static int send_local(Core *c, PyObject *proxy, uint16_t entry, PyObject *const *args, Py_ssize_t nargs) {
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (!plain_array(args[i])) return 0;
    PyObject *info = SLOT(proxy, c->off_info), *index = SLOT(proxy, c->off_index);
    PyObject *coll = info ? SLOT(info, c->off_info_id) : NULL;
    if (!coll || !index) return 0;
    PyObject *copies = PyTuple_New(nargs);
    if (!copies) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = PyArray_NewCopy((PyArrayObject *)args[i], NPY_CORDER);
        if (!a) { Py_DECREF(copies); return -1; }
        PyTuple_SET_ITEM(copies, i, a);
    }
    PyObject *item = Py_BuildValue("(O(OOHN))", Py_None, coll, index, entry, copies);
    if (!item) return -1;
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    Py_DECREF(item);
    if (!r) return -1;
    Py_DECREF(r);
    if (PyLong_AsLong(coll) != SYSTEM_ID) c->sent++;
    return 1;
}

static int send_to(Core *c, long dest, uint8_t kind, uint16_t entry, uint32_t aux, unsigned long long coll,
                   const char *packed, Py_ssize_t plen, PyObject *const *args, Py_ssize_t nargs);

int core_send_call(Core *c, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs) {
    return core_send(c, proxy, 0, (uint16_t)entry, 0, args, nargs);
}

int core_send(Core *c, PyObject *proxy, uint8_t kind, uint16_t entry, uint32_t aux, PyObject *const *args, Py_ssize_t nargs) {
    /* where to: the proxy's cached PE, if no location changed since it was cached */
    PyObject *epoch = SLOT(proxy, c->off_epoch), *now = SLOT(c->locations, c->off_loc_epoch);
    if (!epoch || !now) return 0;
    if (epoch != now) {
        int same = PyObject_RichCompareBool(epoch, now, Py_EQ);
        if (same <= 0) { if (same < 0) PyErr_Clear(); return 0; }
    }
    long dest = PyLong_AsLong(SLOT(proxy, c->off_dest));
    PyObject *packed = SLOT(proxy, c->off_packed);
    if (dest == (long)c->pe && kind == 0 && nargs > 0) return send_local(c, proxy, entry, args, nargs);
    if (dest < 0 || dest == (long)c->pe || !packed || !PyBytes_CheckExact(packed) || nargs > MAX_ARGS) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t plen = PyBytes_GET_SIZE(packed);
    if (plen > 8 * MAX_INDEX) return 0;
    unsigned long long coll = PyLong_AsUnsignedLongLong(SLOT(SLOT(proxy, c->off_info), c->off_info_id));
    if (coll == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return send_to(c, dest, kind, entry, aux, coll, PyBytes_AS_STRING(packed), plen, args, nargs);
}

/* Encode `args` (plain arrays: descriptor and memory; else shoal's pickler) and send them
 * to PE `dest` with the header (kind, entry, this PE, aux, coll, index). 1 sent; 0 not
 * handled (nothing done); -1 error. */
static int send_to(Core *c, long dest, uint8_t kind, uint16_t entry, uint32_t aux, unsigned long long coll,
                   const char *packed, Py_ssize_t plen, PyObject *const *args, Py_ssize_t nargs) {
    char header[HSIZE + 8 * MAX_INDEX];
    uint8_t nidx = (uint8_t)(plen / 8);
    uint64_t cid = coll;
    int all_arrays = nargs > 0;
    for (Py_ssize_t i = 0; i < nargs && all_arrays; i++) all_arrays = plain_array(args[i]);
    if (all_arrays) kind |= KIND_ARRAYS;
    header[0] = (char)kind;
    header[1] = (char)nidx;
    memcpy(header + 2, &entry, 2);
    memcpy(header + 4, &c->pe, 4);
    memcpy(header + 8, &aux, 4);
    memcpy(header + 12, &cid, 8);
    if (plen) memcpy(header + HSIZE, packed, plen);
    Py_ssize_t hlen = HSIZE + plen;

    int sent;
    if (all_arrays) {
        char desc[1 + MAX_ARGS * 64];
        char *p = desc, *end = desc + sizeof desc;
        *p++ = (char)nargs;
        const char *segs[MAX_ARGS + 1];
        Py_ssize_t lens[MAX_ARGS + 1];
        for (Py_ssize_t i = 0; i < nargs; i++) {
            PyArrayObject *a = (PyArrayObject *)args[i];
            if (!(p = describe(p, end, a))) return 0;
            segs[i + 1] = PyArray_DATA(a);
            lens[i + 1] = PyArray_NBYTES(a);
        }
        segs[0] = desc;
        lens[0] = p - desc;
        sent = frames_send_inline(c->frames, (int)dest, header, hlen, segs, lens, nargs + 1);
        if (sent == 0) { /* large: the descriptor and the arrays themselves, zero-copy */
            PyObject *list = PyList_New(nargs + 1);
            if (!list) return -1;
            PyObject *d = PyBytes_FromStringAndSize(desc, lens[0]);
            if (!d) { Py_DECREF(list); return -1; }
            PyList_SET_ITEM(list, 0, d);
            for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyList_SET_ITEM(list, i + 1, args[i]); }
            sent = send_slow(c, dest, header, hlen, list);
            Py_DECREF(list);
        }
    } else {
        PyObject *tuple = PyTuple_New(nargs);
        if (!tuple) return -1;
        for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(tuple, i, args[i]); }
        PyObject *segments = PyObject_CallOneArg(c->encode, tuple);
        Py_DECREF(tuple);
        if (!segments) { PyErr_Clear(); return 0; } /* the Python path names the argument that failed */
        Py_ssize_t nseg = PyList_GET_SIZE(segments);
        Py_buffer views[MAX_ARGS];
        const char *segs[MAX_ARGS];
        Py_ssize_t lens[MAX_ARGS], got = 0;
        sent = 0;
        if (nseg <= MAX_ARGS) {
            for (; got < nseg; got++) {
                if (PyObject_GetBuffer(PyList_GET_ITEM(segments, got), &views[got], PyBUF_C_CONTIGUOUS) < 0) { sent = -1; break; }
                segs[got] = views[got].buf;
                lens[got] = views[got].len;
            }
            if (sent == 0) sent = frames_send_inline(c->frames, (int)dest, header, hlen, segs, lens, nseg);
            for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
        }
        if (sent == 0) sent = send_slow(c, dest, header, hlen, segments);
        Py_DECREF(segments);
    }
    if (sent > 0 && cid != SYSTEM_ID) c->sent++;
    return sent;
}

/* -- receiving ---------------------------------------------------------------- */

/* Arrays from an ARRAYS payload (descriptor segment, then one segment per array), each
 * in fresh memory copied from the frame: a new reference to the args tuple, NULL with no
 * error if the payload is not what it should be, or NULL with an error. */
static PyObject *rebuild_arrays(Core *c, const char *desc, Py_ssize_t dlen, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    PyObject *key = PyBytes_FromStringAndSize(desc, dlen);
    if (!key) return NULL;
    PyObject *layout = PyDict_GetItemWithError(c->layouts, key);
    if (layout) Py_INCREF(layout);
    else if (!PyErr_Occurred()) layout = PyObject_CallOneArg(c->layout, key);
    Py_DECREF(key);
    if (!layout) return NULL;
    Py_ssize_t n = PyTuple_Check(layout) ? PyTuple_GET_SIZE(layout) : -1;
    if (n != nseg) { Py_DECREF(layout); return NULL; }
    PyObject *out = PyTuple_New(n);
    if (!out) { Py_DECREF(layout); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(layout, i);
        PyObject *dtype = PyTuple_GET_ITEM(pair, 0), *shape = PyTuple_GET_ITEM(pair, 1);
        npy_intp dims[NPY_MAXDIMS];
        int nd = (int)PyTuple_GET_SIZE(shape);
        for (int k = 0; k < nd; k++) dims[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
        Py_INCREF(dtype);
        PyObject *a = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)dtype, nd, dims, NULL, NULL, 0, NULL);
        if (!a) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        PyTuple_SET_ITEM(out, i, a);
        if (PyArray_NBYTES((PyArrayObject *)a) != lens[i]) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        memcpy(PyArray_DATA((PyArrayObject *)a), segs[i], lens[i]);
    }
    Py_DECREF(layout);
    return out;
}

/* Run `fn(el, *args)` as the runtime's run_entry does, with no reply. */
static int run_entry(Core *c, PyObject *el, PyObject *fn, PyObject *args) {
    PyObject *vec[MAX_ARGS + 2];
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    PyObject *r;
    c->depth++;
    if (nargs <= MAX_ARGS) {
        vec[1] = el;
        for (Py_ssize_t i = 0; i < nargs; i++) vec[i + 2] = PyTuple_GET_ITEM(args, i);
        r = PyObject_Vectorcall(fn, vec + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    } else {
        PyObject *head = PyTuple_Pack(1, el), *all = head ? PySequence_Concat(head, args) : NULL;
        r = all ? PyObject_Call(fn, all, NULL) : NULL;
        Py_XDECREF(head);
        Py_XDECREF(all);
    }
    c->depth--;
    PyObject *follow = NULL;
    if (r == NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        follow = PyObject_CallFunctionObjArgs(c->failed, el, fn, value, Py_None, NULL);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else if (PyCoro_CheckExact(r)) {
        follow = PyObject_CallFunctionObjArgs(c->start_task, el, fn, r, Py_None, NULL);
        Py_DECREF(r);
    } else {
        Py_DECREF(r);
        return 0;
    }
    if (!follow) return -1;
    Py_DECREF(follow);
    return 0;
}

/* A channel message for element `el` that completes a pending receive: its values go
 * straight to the channel (into the posted array, if the receive posted one that
 * matches). 1 done; 0 for the Python path (no receive pending, a mismatch: it
 * queues or reports); -1 error. */
static int channel_deliver(Core *c, PyObject *el, uint8_t kind, uint32_t tag, uint64_t coll,
                           const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, Frames *frames) {
    PyObject *table = PyObject_GetAttr(el, str_channels);
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
    int r = 0;
    PyObject *fut = SLOT(ch, c->off_waiting), *into = SLOT(ch, c->off_into), *arrived = SLOT(ch, c->off_arrived);
    /* a pending receive of a local future (fid 0) that nothing resolved yet */
    if (!fut || fut == Py_None || !into || !arrived || !SLOT(fut, c->off_fid) || !SLOT(fut, c->off_state) ||
        PyLong_AsLong(SLOT(fut, c->off_fid)) != 0 || PyLong_AsLong(SLOT(fut, c->off_state)) != 0) {
        PyErr_Clear();
        goto done;
    }
    PyObject *value;
    if (into != Py_None) {
        /* one array of exactly the posted layout: copy it from the frame into place */
        if (!(kind & KIND_ARRAYS) || nseg != 2 || !PyArray_Check(into)) goto done;
        PyArrayObject *a = (PyArrayObject *)into;
        char want[1 + 64], *p = want;
        *p++ = 1;
        if (!(p = describe(p, want + sizeof want, a)) || p - want != lens[0] || memcmp(want, segs[0], lens[0]) != 0 ||
            PyArray_NBYTES(a) != lens[1] || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a))
            goto done;
        memcpy(PyArray_DATA(a), segs[1], lens[1]);
        Py_INCREF(into);
        value = into;
    } else {
        PyObject *values;
        if (kind & KIND_ARRAYS) {
            values = rebuild_arrays(c, segs[0], lens[0], segs + 1, lens + 1, nseg - 1);
        } else if (nseg == 1) {
            PyObject *stream = PyBytes_FromStringAndSize(segs[0], lens[0]);
            values = stream ? PyObject_CallOneArg(c->loads, stream) : NULL;
            Py_XDECREF(stream);
            if (values && !PyTuple_Check(values)) Py_CLEAR(values);
        } else {
            values = NULL;
        }
        if (!values) { PyErr_Clear(); goto done; }
        if (PyTuple_GET_SIZE(values) == 1) {
            value = PyTuple_GET_ITEM(values, 0);
            Py_INCREF(value);
            Py_DECREF(values);
        } else {
            value = values;
        }
    }
    if (frames_restart(frames)) { Py_DECREF(value); r = -1; goto done; }
    if (coll != SYSTEM_ID) c->received++;
    /* Channel.arrive + Future._resolve: the next sequence number, the value, the callbacks */
    PyObject *next = PyLong_FromLong((PyLong_AsLong(arrived) + 1) & 0xFFFF);
    if (!next) { Py_DECREF(value); r = -1; goto done; }
    Py_XSETREF(SLOT(ch, c->off_arrived), next);
    Py_INCREF(fut);
    Py_INCREF(Py_None);
    Py_XSETREF(SLOT(ch, c->off_waiting), Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(SLOT(ch, c->off_into), Py_None);
    Py_XSETREF(SLOT(fut, c->off_value), value);
    PyObject *done_state = PyLong_FromLong(1); /* futures._DONE */
    Py_XSETREF(SLOT(fut, c->off_state), done_state);
    PyObject *callbacks = SLOT(fut, c->off_callbacks);
    r = 1;
    if (callbacks && callbacks != Py_None) {
        SLOT(fut, c->off_callbacks) = Py_None;
        Py_INCREF(Py_None);
        if (PyList_Check(callbacks)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(callbacks) && r > 0; i++) {
                PyObject *res = PyObject_CallOneArg(PyList_GET_ITEM(callbacks, i), fut);
                if (!res) r = -1; else Py_DECREF(res);
            }
        }
        Py_DECREF(callbacks);
    }
    Py_DECREF(fut);
done:
    Py_DECREF(ch);
    return r;
}

/* Arguments of a message (an args tuple, new reference), decoded from the frame; NULL
 * with no error set if the compiled path does not decode this one. */
static PyObject *decode_args(Core *c, uint8_t kind, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    PyObject *args = NULL;
    if (kind & KIND_ARRAYS) {
        args = rebuild_arrays(c, segs[0], lens[0], segs + 1, lens + 1, nseg - 1);
    } else if (nseg == 1) {
        PyObject *stream = PyBytes_FromStringAndSize(segs[0], lens[0]);
        args = stream ? PyObject_CallOneArg(c->loads, stream) : NULL;
        Py_XDECREF(stream);
        if (args && !PyTuple_Check(args)) Py_CLEAR(args);
    }
    if (!args) PyErr_Clear(); /* the Python path decodes it again and reports any error in context */
    return args;
}

/* A reduction message carrying one value (see Runtime._on_value). */
static int value_deliver(Core *c, uint8_t kind, uint16_t entry, uint32_t aux, uint64_t coll,
                         const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, Frames *frames) {
    PyObject *args = decode_args(c, kind, segs, lens, nseg);
    if (!args) return 0;
    if (PyTuple_GET_SIZE(args) != 1 || frames_restart(frames)) { Py_DECREF(args); return PyErr_Occurred() ? -1 : 0; }
    if (coll != SYSTEM_ID) c->received++;
    PyObject *r = PyObject_CallFunction(c->on_value, "iIIKO", kind & KIND_MASK, (unsigned)entry, (unsigned)aux,
                                        (unsigned long long)coll, PyTuple_GET_ITEM(args, 0));
    Py_DECREF(args);
    if (!r) return -1;
    Py_DECREF(r);
    return 1;
}

int core_deliver(Core *c, const char *frame, Py_ssize_t n, Frames *frames) {
    uint16_t pre[2];
    memcpy(pre, frame, 4);
    Py_ssize_t hlen = pre[0], nseg = pre[1];
    Py_ssize_t off = 4 + 8 * nseg;
    if (nseg < 1 || nseg > MAX_ARGS + 1 || hlen < HSIZE || off + hlen > n) return 0;
    const unsigned char *h = (const unsigned char *)frame + off;
    uint8_t kind = h[0], nidx = h[1];
    uint16_t entry;
    uint32_t aux;
    uint64_t coll;
    memcpy(&entry, h + 2, 2);
    memcpy(&aux, h + 8, 4);
    memcpy(&coll, h + 12, 8);
    int k = kind & KIND_MASK, channel = k == KIND_CHANNEL;
    int value = k == KIND_EXCHANGE || ((k == KIND_REDUCE || k == KIND_RESULT) && entry != 0);
    if (!(channel || value || (k == 0 && aux == 0)) || (kind & KIND_KWARGS) || nidx > MAX_INDEX || hlen != HSIZE + 8 * nidx) return 0;
    const char *segs[MAX_ARGS + 1];
    Py_ssize_t lens[MAX_ARGS + 1];
    Py_ssize_t pos = off + hlen;
    for (Py_ssize_t i = 0; i < nseg; i++) {
        uint64_t w;
        memcpy(&w, frame + 4 + 8 * i, 8);
        segs[i] = frame + pos;
        lens[i] = (Py_ssize_t)(w >> 1);
        pos += lens[i];
    }
    if (pos > n) return 0;

    if (value) return value_deliver(c, kind, entry, aux, coll, segs, lens, nseg, frames);

    /* the element, if it is here (else the Python path forwards, holds or fails) */
    PyObject *key = PyLong_FromUnsignedLongLong(coll);
    if (!key) return -1;
    PyObject *cs = PyDict_GetItemWithError(c->colls, key);
    Py_DECREF(key);
    if (!cs) return PyErr_Occurred() ? -1 : 0;
    PyObject *elements = SLOT(cs, c->off_elements);
    PyObject *index = PyTuple_New(nidx);
    if (!index) return -1;
    for (int i = 0; i < nidx; i++) {
        int64_t v;
        memcpy(&v, h + HSIZE + 8 * i, 8);
        PyObject *o = PyLong_FromLongLong(v);
        if (!o) { Py_DECREF(index); return -1; }
        PyTuple_SET_ITEM(index, i, o);
    }
    PyObject *el = elements && PyDict_Check(elements) ? PyDict_GetItemWithError(elements, index) : NULL;
    Py_DECREF(index);
    if (!el) return PyErr_Occurred() ? -1 : 0;
    if (channel) return channel_deliver(c, el, kind, aux, coll, segs, lens, nseg, frames);
    PyObject *funcs = PyObject_GetAttr(el, str_funcs);
    if (!funcs) return -1;
    if (!PyTuple_Check(funcs) || entry >= PyTuple_GET_SIZE(funcs)) { Py_DECREF(funcs); return 0; }
    PyObject *fn = PyTuple_GET_ITEM(funcs, entry);
    Py_INCREF(fn);
    Py_DECREF(funcs);

    /* the arguments, out of the receive buffer; then it can take the next frame */
    PyObject *args;
    if (kind & KIND_ARRAYS) {
        args = rebuild_arrays(c, segs[0], lens[0], segs + 1, lens + 1, nseg - 1);
    } else if (nseg == 1) {
        PyObject *stream = PyBytes_FromStringAndSize(segs[0], lens[0]);
        args = stream ? PyObject_CallOneArg(c->loads, stream) : NULL;
        Py_XDECREF(stream);
        if (args && !PyTuple_Check(args)) Py_CLEAR(args);
    } else {
        args = NULL;
    }
    if (!args) {
        Py_DECREF(fn);
        if (!PyErr_Occurred()) return 0;
        PyErr_Clear(); /* the Python path decodes it again and reports the error in context */
        return 0;
    }
    Py_INCREF(el);
    int err = frames_restart(frames);
    if (!err) {
        if (coll != SYSTEM_ID) c->received++;
        err = run_entry(c, el, fn, args);
    }
    Py_DECREF(el);
    Py_DECREF(fn);
    Py_DECREF(args);
    return err ? -1 : 1;
}

static PyObject *Core_describe(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    char desc[1 + MAX_ARGS * 64], *p = desc;
    if (nargs > MAX_ARGS) { PyErr_SetString(PyExc_ValueError, "too many arrays"); return NULL; }
    *p++ = (char)nargs;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!plain_array(args[i])) { PyErr_SetString(PyExc_TypeError, "plain C-contiguous arrays only"); return NULL; }
        if (!(p = describe(p, desc + sizeof desc, (PyArrayObject *)args[i]))) { PyErr_SetString(PyExc_ValueError, "too many dimensions"); return NULL; }
    }
    return PyBytes_FromStringAndSize(desc, p - desc);
}

/* ChannelSend(core, channel, fallback): what `channel.send` is when the runtime has a
 * compiled core. Keyword-free sends of a channel to another PE go out here; anything
 * else calls fallback(channel, *values), the Python send (channels.py). */
typedef struct {
    PyObject_HEAD
    Core *core;
    PyObject *channel;
    PyObject *fallback;
    vectorcallfunc vectorcall;
} ChannelSend;

static PyObject *channel_send_call(ChannelSend *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Core *c = self->core;
    PyObject *ch = self->channel;
    if (kwnames == NULL && active == c && SLOT(ch, c->off_sent) && SLOT(ch, c->off_tag) && SLOT(ch, c->off_remote)) {
        long seq = PyLong_AsLong(SLOT(ch, c->off_sent));
        unsigned long tag = PyLong_AsUnsignedLong(SLOT(ch, c->off_tag));
        if (PyErr_Occurred()) return NULL;
        int r = core_send(c, SLOT(ch, c->off_remote), KIND_CHANNEL, (uint16_t)seq, (uint32_t)tag, args, nargs);
        if (r < 0) return NULL;
        if (r) {
            PyObject *next = PyLong_FromLong((seq + 1) & 0xFFFF);
            if (!next) return NULL;
            Py_XSETREF(SLOT(ch, c->off_sent), next);
            Py_RETURN_NONE;
        }
    }
    PyObject *vec[MAX_ARGS + 2], *r;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw <= MAX_ARGS) {
        vec[1] = ch;
        for (Py_ssize_t i = 0; i < nargs + nkw; i++) vec[i + 2] = args[i];
        r = PyObject_Vectorcall(self->fallback, vec + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    } else {
        PyObject *all = PyTuple_New(nargs + 1);
        if (!all) return NULL;
        Py_INCREF(ch);
        PyTuple_SET_ITEM(all, 0, ch);
        for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(all, i + 1, args[i]); }
        r = PyObject_Call(self->fallback, all, NULL); /* keywords: Channel.send takes none */
        Py_DECREF(all);
    }
    return r;
}

static int ChannelSend_init(ChannelSend *self, PyObject *args, PyObject *kw) {
    PyObject *core, *channel, *fallback;
    if (!PyArg_ParseTuple(args, "O!OO", &CoreType, &core, &channel, &fallback)) return -1;
    Py_INCREF(core); Py_XSETREF(self->core, (Core *)core);
    Py_INCREF(channel); Py_XSETREF(self->channel, channel);
    Py_INCREF(fallback); Py_XSETREF(self->fallback, fallback);
    self->vectorcall = (vectorcallfunc)channel_send_call;
    return 0;
}

static int ChannelSend_traverse(ChannelSend *self, visitproc visit, void *arg) {
    Py_VISIT(self->channel);
    Py_VISIT(self->fallback);
    return 0;
}

static int ChannelSend_clear(ChannelSend *self) {
    Py_CLEAR(self->channel);
    Py_CLEAR(self->fallback);
    return 0;
}

static void ChannelSend_dealloc(ChannelSend *self) {
    PyObject_GC_UnTrack(self);
    ChannelSend_clear(self);
    Py_XDECREF(self->core);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ChannelSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.ChannelSend",
    .tp_basicsize = sizeof(ChannelSend),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ChannelSend(core, channel, fallback): a channel's send(*values), compiled.",
    .tp_vectorcall_offset = offsetof(ChannelSend, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ChannelSend_init,
    .tp_traverse = (traverseproc)ChannelSend_traverse,
    .tp_clear = (inquiry)ChannelSend_clear,
    .tp_dealloc = (destructor)ChannelSend_dealloc,
};

/* run_local(deliver, deliver_direct) -> count: the messages queued for this PE's own
 * elements when it was called (Runtime.step's local loop). Array calls of elements that
 * are here run in C; the rest go to deliver(header, segments) or
 * deliver_direct(coll, index, entry, args), the Python handlers. */
static PyObject *Core_run_local(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "run_local(deliver, deliver_direct)"); return NULL; }
    Py_ssize_t n = PyObject_Length(c->local);
    if (n < 0) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyObject_CallNoArgs(c->local_popleft);
        if (!item) return NULL;
        PyObject *header = PyTuple_GET_ITEM(item, 0), *body = PyTuple_GET_ITEM(item, 1);
        PyObject *r = NULL;
        if (header != Py_None) {
            r = PyObject_CallFunctionObjArgs(args[0], header, body, NULL);
        } else {
            PyObject *coll = PyTuple_GET_ITEM(body, 0), *index = PyTuple_GET_ITEM(body, 1);
            PyObject *cs = PyDict_GetItemWithError(c->colls, coll);
            PyObject *elements = cs ? SLOT(cs, c->off_elements) : NULL;
            PyObject *el = elements && PyDict_Check(elements) ? PyDict_GetItemWithError(elements, index) : NULL;
            PyObject *funcs = el ? PyObject_GetAttr(el, str_funcs) : NULL;
            long entry = PyLong_AsLong(PyTuple_GET_ITEM(body, 2));
            if (funcs && PyTuple_Check(funcs) && entry >= 0 && entry < PyTuple_GET_SIZE(funcs)) {
                PyObject *fn = PyTuple_GET_ITEM(funcs, entry);
                Py_INCREF(fn);
                Py_INCREF(el);
                if (PyLong_AsLong(coll) != SYSTEM_ID) c->received++;
                int err = run_entry(c, el, fn, PyTuple_GET_ITEM(body, 3));
                Py_DECREF(el);
                Py_DECREF(fn);
                r = err ? NULL : Py_NewRef(Py_None);
            } else if (!PyErr_Occurred()) {
                r = PyObject_Call(args[1], body, NULL); /* not here (yet): the Python path */
            }
            Py_XDECREF(funcs);
        }
        Py_DECREF(item);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    return PyLong_FromSsize_t(n);
}

/* send_value(dest, kind, entry, aux, coll, value) -> bool: one value to another PE, in a
 * message of no element (reductions); False: not handled, use Runtime.post_value's Python. */
static PyObject *Core_send_value(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) { PyErr_SetString(PyExc_TypeError, "send_value(dest, kind, entry, aux, coll, value)"); return NULL; }
    long dest = PyLong_AsLong(args[0]), kind = PyLong_AsLong(args[1]), entry = PyLong_AsLong(args[2]);
    unsigned long aux = PyLong_AsUnsignedLong(args[3]);
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (dest == (long)c->pe || dest < 0) Py_RETURN_FALSE;
    int r = send_to(c, dest, (uint8_t)kind, (uint16_t)entry, (uint32_t)aux, coll, NULL, 0, args + 5, 1);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

static PyObject *Core_channel_send(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "channel_send(channel, fallback)"); return NULL; }
    return PyObject_CallFunctionObjArgs((PyObject *)&ChannelSendType, (PyObject *)self, args[0], args[1], NULL);
}

static PyMemberDef Core_members[] = {
    {"sent", T_LONGLONG, offsetof(Core, sent), 0, "program messages sent (quiescence detection)"},
    {"received", T_LONGLONG, offsetof(Core, received), 0, "program messages received"},
    {"depth", T_LONGLONG, offsetof(Core, depth), 0, "entry methods running (nested) now"},
    {NULL}
};

static PyMethodDef Core_methods[] = {
    {"send_value", (PyCFunction)(void (*)(void))Core_send_value, METH_FASTCALL, "send_value(dest, kind, entry, aux, coll, value) -> bool"},
    {"run_local", (PyCFunction)(void (*)(void))Core_run_local, METH_FASTCALL, "run_local(deliver, deliver_direct) -> messages run"},
    {"channel_send", (PyCFunction)(void (*)(void))Core_channel_send, METH_FASTCALL, "channel_send(channel, fallback) -> the channel's compiled send(*values)"},
    {"detach", (PyCFunction)Core_detach, METH_NOARGS, "stop serving the runtime"},
    {NULL}
};

PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A runtime's compiled per-message paths and counters.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
    .tp_members = Core_members,
};

static PyMethodDef dispatch_functions[] = {
    {"describe", (PyCFunction)(void (*)(void))Core_describe, METH_FASTCALL, "describe(*arrays) -> the ARRAYS descriptor the compiled path sends"},
    {NULL}
};

int dispatch_init(PyObject *m) {
    if (_import_array() < 0) return -1;
    if (!(str_funcs = PyUnicode_InternFromString("_shoal_funcs")) || !(str_channels = PyUnicode_InternFromString("_shoal_channels")))
        return -1;
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&ChannelSendType) < 0) return -1;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) return -1;
    Py_INCREF(&ChannelSendType);
    if (PyModule_AddObject(m, "ChannelSend", (PyObject *)&ChannelSendType) < 0) return -1;
    return PyModule_AddFunctions(m, dispatch_functions);
}
