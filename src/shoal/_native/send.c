/* The compiled send paths (reference: Runtime.invoke / _to_element / post_value and
 * Channel._send in shoal/_runtime): entry-method calls to another PE's element, to one of
 * this PE's elements, channel messages and one-value reduction messages. */
#include "core.h"

/* The dtype code of `d` (dtype.str: byte order, kind, item size in decimal) at `code`
 * (room for 24); its length. Written by hand: snprintf was 6% of a PE's time in an
 * 8-byte ping-pong. */
int dtype_code(char *code, PyArray_Descr *d, long long itemsize) {
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + itemsize % 10);
        itemsize /= 10;
    } while (itemsize > 0 && n < 20);
    code[0] = d->byteorder == '=' ? '<' : d->byteorder;
    code[1] = d->kind;
    for (int i = 0; i < n; i++) code[2 + i] = digits[n - 1 - i];
    return 2 + n;
}

/* Append the descriptor of array `a` (_runtime/message.py _describe) at `p`; the new end, or NULL. */
char *describe(char *p, char *end, PyArrayObject *a) {
    PyArray_Descr *d = PyArray_DESCR(a);
    int nd = PyArray_NDIM(a);
    char code[24];
    long long itemsize = (long long)PyArray_ITEMSIZE(a);
    if (itemsize < 0) return NULL;
    int clen = dtype_code(code, d, itemsize);
    if (p + 2 + clen + 8 * nd > end) return NULL;
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

/* A fresh copy of plain, C-contiguous array `a`: its descriptor and shape, its bytes
 * memcpy'd (PyArray_NewCopy runs NumPy's casting machinery, several times the cost for
 * the small arrays of fine-grained calls). A new reference, or NULL with an error. */
PyObject *copy_plain(PyArrayObject *a) {
    PyArray_Descr *d = PyArray_DESCR(a);
    Py_INCREF(d);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, d, PyArray_NDIM(a), PyArray_DIMS(a), NULL, NULL, 0, NULL);
    if (out) memcpy(PyArray_DATA((PyArrayObject *)out), PyArray_DATA(a), PyArray_NBYTES(a));
    return out;
}

/* `a` (writable, of the dtype and shape the C-ordered `data` describes) holding `data`:
 * one memcpy when `a` is C-contiguous, else NumPy's strided copy (a column face such as
 * u[:, 0]), with no copy in between. 0 done; -1 error. */
int fill_array(PyArrayObject *a, const char *data) {
    if (PyArray_IS_C_CONTIGUOUS(a)) {
        memcpy(PyArray_DATA(a), data, PyArray_NBYTES(a));
        return 0;
    }
    PyArray_Descr *d = PyArray_DESCR(a);
    Py_INCREF(d);
    PyObject *src = PyArray_NewFromDescr(&PyArray_Type, d, PyArray_NDIM(a), PyArray_DIMS(a), NULL, (void *)data, 0, NULL);
    if (!src) return -1;
    int r = PyArray_CopyInto(a, (PyArrayObject *)src);
    Py_DECREF(src);
    return r;
}

/* Whether `o` is an array of a plain dtype that is not C-contiguous (a strided view). */
static int strided_plain(PyObject *o) {
    if (!is_exact_array(o)) return 0;
    char k = PyArray_DESCR((PyArrayObject *)o)->kind;
    return (k == 'b' || k == 'i' || k == 'u' || k == 'f' || k == 'c') && !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o);
}

int plain_array(PyObject *o) {
    if (!is_exact_array(o)) return 0;
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
    PyObject *info = SLOT(proxy, shoal_slots.proxy_info), *index = SLOT(proxy, shoal_slots.proxy_index);
    PyObject *coll = info ? SLOT(info, shoal_slots.info_id) : NULL;
    if (!coll || !index) return 0;
    PyObject *copies = PyTuple_New(nargs);
    if (!copies) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = copy_plain((PyArrayObject *)args[i]);
        if (!a) { Py_DECREF(copies); return -1; }
        PyTuple_SET_ITEM(copies, i, a);
    }
    /* (None, (coll, index, entry, copies)), built by hand: Py_BuildValue parses its format each call */
    PyObject *number = PyLong_FromLong(entry), *body = number ? PyTuple_New(4) : NULL, *item = body ? PyTuple_New(2) : NULL;
    if (!item) { Py_XDECREF(number); Py_XDECREF(body); Py_DECREF(copies); return -1; }
    Py_INCREF(coll);
    Py_INCREF(index);
    PyTuple_SET_ITEM(body, 0, coll);
    PyTuple_SET_ITEM(body, 1, index);
    PyTuple_SET_ITEM(body, 2, number);
    PyTuple_SET_ITEM(body, 3, copies);
    PyTuple_SET_ITEM(item, 0, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(item, 1, body);
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    Py_DECREF(item);
    if (!r) return -1;
    Py_DECREF(r);
    if (!is_system(coll)) c->sent++;
    return 1;
}

int core_send_call(Core *c, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs) {
    return core_send(c, proxy, KIND_INVOKE, (uint16_t)entry, 0, args, nargs);
}

/* Where a message for the element of `proxy` goes: the PE into `*dest` and the index
 * into `packed` (`*plen` bytes). 1 found; 0 not a case for the compiled path; -1 error
 * (a placement that fails raises, as in Python). */
static int route(Core *c, PyObject *proxy, long *dest, char *packed, Py_ssize_t *plen, unsigned long long *coll) {
    /* the proxy's cached PE if no location changed since it was cached, else what the
     * location manager says now (Locations.route caches it on the proxy) */
    PyObject *epoch = SLOT(proxy, shoal_slots.proxy_epoch), *now = SLOT(c->locations, shoal_slots.locations_epoch);
    PyObject *index = SLOT(proxy, shoal_slots.proxy_index), *info = SLOT(proxy, shoal_slots.proxy_info);
    if (!epoch || !now || !index || !info || !PyTuple_Check(index)) return 0;
    int cached = epoch == now ? 1 : PyObject_RichCompareBool(epoch, now, Py_EQ);
    if (cached < 0) return -1;
    if (cached && SLOT(proxy, shoal_slots.proxy_dest)) {
        *dest = PyLong_AsLong(SLOT(proxy, shoal_slots.proxy_dest));
    } else { /* (a cached epoch without a cached PE: ask, rather than read an unset slot) */
        PyObject *d = PyObject_CallOneArg(c->route, proxy);
        if (!d) return -1;
        *dest = PyLong_AsLong(d);
        Py_DECREF(d);
    }
    if (*dest == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t nidx = PyTuple_GET_SIZE(index);
    if (nidx > MAX_INDEX) return 0;
    for (Py_ssize_t i = 0; i < nidx; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(index, i));
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        memcpy(packed + 8 * i, &v, 8);
    }
    *plen = 8 * nidx;
    *coll = PyLong_AsUnsignedLongLong(SLOT(info, shoal_slots.info_id));
    if (*coll == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return 1;
}

static Py_ssize_t make_header(Core *c, char *header, uint8_t kind, uint16_t entry, uint32_t aux, uint64_t coll,
                              const char *packed, Py_ssize_t plen);

/* A channel message of one plain array to an element of this PE that could not be
 * delivered at once (channel_now): the message as the Python path queues it (header,
 * [descriptor, a copy of the array]), which Core.run_local delivers. */
static int send_local_channel(Core *c, uint16_t seq, uint32_t tag, unsigned long long coll,
                              const char *packed, Py_ssize_t plen, PyObject *array) {
    char header[HSIZE + 8 * MAX_INDEX], desc[1 + 64], *p = desc;
    *p++ = 1;
    if (!(p = describe(p, desc + sizeof desc, (PyArrayObject *)array))) return 0;
    Py_ssize_t hlen = make_header(c, header, KIND_CHANNEL | KIND_ARRAYS, seq, tag, coll, packed, plen);
    PyObject *copy = copy_plain((PyArrayObject *)array);
    PyObject *item = copy ? Py_BuildValue("(y#[y#N])", header, hlen, desc, (Py_ssize_t)(p - desc), copy) : NULL;
    if (!item) return -1;
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    Py_DECREF(item);
    if (!r) return -1;
    Py_DECREF(r);
    if (coll != SYSTEM_ID) c->sent++;
    return 1;
}

int core_send(Core *c, PyObject *proxy, uint8_t kind, uint16_t entry, uint32_t aux, PyObject *const *args, Py_ssize_t nargs) {
    long dest;
    char packed[8 * MAX_INDEX];
    Py_ssize_t plen;
    unsigned long long coll;
    int found = route(c, proxy, &dest, packed, &plen, &coll);
    if (found <= 0) return found;
    if (kind != KIND_CHANNEL && sample_comm(c, proxy, args, nargs) < 0) return -1;
    if (dest == (long)c->pe && kind == KIND_INVOKE && aux == 0 && nargs > 0) return send_local(c, proxy, entry, args, nargs);
    if (dest == (long)c->pe && kind == KIND_CHANNEL && nargs == 1 && plain_array(args[0]))
        return send_local_channel(c, entry, aux, coll, packed, plen, args[0]);
    if (dest < 0 || dest == (long)c->pe || nargs > MAX_ARGS) return 0;
    return send_to(c, dest, kind, entry, aux, coll, packed, plen, args, nargs);
}

/* The header of a message from this PE: kind, index rank, entry, source, aux, collection, index. */
static Py_ssize_t make_header(Core *c, char *header, uint8_t kind, uint16_t entry, uint32_t aux, uint64_t coll,
                              const char *packed, Py_ssize_t plen) {
    header[H_KIND] = (char)kind;
    header[H_RANK] = (char)(plen / 8);
    memcpy(header + H_ENTRY, &entry, 2);
    memcpy(header + H_SRC, &c->pe, 4);
    memcpy(header + H_AUX, &aux, 4);
    memcpy(header + H_COLL, &coll, 8);
    if (plen) memcpy(header + HSIZE, packed, plen);
    return HSIZE + plen;
}

/* Send `segments` (a list of buffers: the pickle stream, then out-of-band buffers) after
 * `header`: one eager frame if they fit, else the Python transport. 1 sent; -1 error. */
int send_segments(Core *c, long dest, const char *header, Py_ssize_t hlen, PyObject *segments) {
    if (!PyList_Check(segments)) {
        PyErr_Format(PyExc_TypeError, "message.encode returned %.200s, not a list", Py_TYPE(segments)->tp_name);
        return -1;
    }
    Py_ssize_t nseg = PyList_GET_SIZE(segments);
    Py_buffer views[MAX_ARGS];
    const char *segs[MAX_ARGS] = {NULL};
    Py_ssize_t lens[MAX_ARGS] = {0}, got = 0;
    int sent = 0;
    if (nseg <= MAX_ARGS) {
        for (; got < nseg; got++) {
            PyObject *seg = PyList_GET_ITEM(segments, got);
            if (!PyObject_CheckBuffer(seg)) break; /* device memory (a DeviceSegment): the Python transport */
            if (PyObject_GetBuffer(seg, &views[got], PyBUF_C_CONTIGUOUS) < 0) { sent = -1; break; }
            segs[got] = views[got].buf;
            lens[got] = views[got].len;
        }
        if (sent == 0 && got == nseg) sent = frames_send_inline(c->frames, (int)dest, header, hlen, segs, lens, nseg);
        for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    }
    if (sent == 0) sent = send_slow(c, dest, header, hlen, segments);
    return sent;
}

int core_send_kw(Core *c, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs) {
    long dest;
    char packed[8 * MAX_INDEX], header[HSIZE + 8 * MAX_INDEX];
    Py_ssize_t plen;
    unsigned long long coll;
    int found = route(c, proxy, &dest, packed, &plen, &coll);
    if (found <= 0) return found;
    if (dest < 0 || dest == (long)c->pe) return 0;
    PyObject *tuple = PyTuple_New(nargs);
    if (!tuple) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(tuple, i, args[i]); }
    PyObject *payload = PyTuple_Pack(2, tuple, kwargs);
    Py_DECREF(tuple);
    PyObject *segments = payload ? PyObject_CallOneArg(c->encode, payload) : NULL;
    Py_XDECREF(payload);
    if (!segments) { PyErr_Clear(); return 0; } /* the Python path names the argument that failed */
    Py_ssize_t hlen = make_header(c, header, KIND_KWARGS, (uint16_t)entry, 0, coll, packed, plen);
    int sent = send_segments(c, dest, header, hlen, segments);
    Py_DECREF(segments);
    if (sent > 0 && coll != SYSTEM_ID) c->sent++;
    return sent;
}

/* (header, [payload]) on this PE's local queue, as Runtime.send_raw puts a message to
 * itself: 1, or -1 with an error. */
static int send_local_bytes(Core *c, const char *header, Py_ssize_t hlen, const char *payload, Py_ssize_t plen) {
    PyObject *h = PyBytes_FromStringAndSize(header, hlen), *p = PyBytes_FromStringAndSize(payload, plen);
    PyObject *segments = h && p ? PyList_New(1) : NULL, *item = segments ? PyTuple_New(2) : NULL;
    if (!item) { Py_XDECREF(h); Py_XDECREF(p); Py_XDECREF(segments); return -1; }
    PyList_SET_ITEM(segments, 0, p);
    PyTuple_SET_ITEM(item, 0, h);
    PyTuple_SET_ITEM(item, 1, segments);
    PyObject *r = PyObject_CallOneArg(c->local_append, item);
    Py_DECREF(item);
    if (!r) return -1;
    Py_DECREF(r);
    return 1;
}

int core_broadcast(Core *c, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, int ret, PyObject **out) {
    if (c->trace) return 0; /* the Python path puts the send in the timeline */
    PyObject *info = SLOT(proxy, shoal_slots.proxy_info);
    PyObject *id = info ? SLOT(info, shoal_slots.info_id) : NULL, *root = info ? SLOT(info, shoal_slots.info_root) : NULL;
    if (!id || !root) return 0;
    char simple[SIMPLE_PICKLE_MAX];
    Py_ssize_t slen = pickle_simple(simple, args, nargs);
    if (slen <= 0) return 0;
    unsigned long long coll = PyLong_AsUnsignedLongLong(id);
    long dest = PyLong_AsLong(root);
    if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (dest < 0 || dest > INT_MAX) return 0;
    PyObject *fut = NULL, *fid = NULL;
    uint32_t aux = 0;
    if (ret) { /* made in the caller's frame: this path runs no Python frame of its own */
        if (!(fut = core_new_future(c, 0))) return -1;
        fid = SLOT(fut, shoal_slots.future_fid);
        aux = (uint32_t)PyLong_AsUnsignedLong(fid);
    }
    char header[HSIZE];
    Py_ssize_t hlen = make_header(c, header, KIND_BROADCAST, (uint16_t)entry, aux, coll, NULL, 0);
    int sent;
    if (dest == (long)c->pe) {
        sent = send_local_bytes(c, header, hlen, simple, slen);
    } else {
        const char *seg = simple;
        sent = frames_send_inline(c->frames, (int)dest, header, hlen, &seg, &slen, 1);
        if (sent == 0) {
            PyObject *list = PyList_New(1), *p = list ? PyBytes_FromStringAndSize(simple, slen) : NULL;
            if (p) {
                PyList_SET_ITEM(list, 0, p);
                sent = send_slow(c, dest, header, hlen, list);
            } else {
                sent = -1;
            }
            Py_XDECREF(list);
        }
    }
    if (sent < 0) {
        if (fut) { /* nobody will resolve it: unregister it (keeping the send's error) */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (PyDict_DelItem(c->futures, fid) < 0) PyErr_Clear();
            PyErr_Restore(type, value, tb);
            Py_DECREF(fut);
        }
        return -1;
    }
    if (coll != SYSTEM_ID) c->sent++;
    *out = fut ? fut : Py_NewRef(Py_None);
    return 1;
}

/* Encode `args` (plain arrays: descriptor and memory; else shoal's pickler) and send them
 * to PE `dest` with the header (kind, entry, this PE, aux, coll, index). 1 sent; 0 not
 * handled (nothing done); -1 error. */
int send_to(Core *c, long dest, uint8_t kind, uint16_t entry, uint32_t aux, unsigned long long coll,
            const char *packed, Py_ssize_t plen, PyObject *const *args, Py_ssize_t nargs) {
    char header[HSIZE + 8 * MAX_INDEX];
    uint64_t cid = coll;
    if (dest < 0 || dest > INT_MAX) return 0; /* not an MPI rank: the Python path reports it */
    int all_arrays = nargs > 0;
    for (Py_ssize_t i = 0; i < nargs && all_arrays; i++) all_arrays = plain_array(args[i]);
    if (all_arrays) kind |= KIND_ARRAYS;
    Py_ssize_t hlen = make_header(c, header, kind, entry, aux, cid, packed, plen);

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
        char simple[SIMPLE_PICKLE_MAX];
        Py_ssize_t slen = pickle_simple(simple, args, nargs);
        if (slen > 0) {
            const char *seg = simple;
            sent = frames_send_inline(c->frames, (int)dest, header, hlen, &seg, &slen, 1);
            if (sent != 0) goto counted;
        }
        PyObject *tuple = PyTuple_New(nargs);
        if (!tuple) return -1;
        for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i]); PyTuple_SET_ITEM(tuple, i, args[i]); }
        PyObject *segments = PyObject_CallOneArg(c->encode, tuple);
        Py_DECREF(tuple);
        if (!segments) { PyErr_Clear(); return 0; } /* the Python path names the argument that failed */
        sent = send_segments(c, dest, header, hlen, segments);
        Py_DECREF(segments);
    }
counted:
    if (sent > 0 && cid != SYSTEM_ID) c->sent++;
    return sent;
}

PyObject *Core_describe(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    char desc[1 + MAX_ARGS * 64], *p = desc;
    if (nargs > MAX_ARGS) { PyErr_SetString(PyExc_ValueError, "too many arrays"); return NULL; }
    *p++ = (char)nargs;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (!plain_array(args[i])) { PyErr_SetString(PyExc_TypeError, "plain C-contiguous arrays only"); return NULL; }
        if (!(p = describe(p, desc + sizeof desc, (PyArrayObject *)args[i]))) { PyErr_SetString(PyExc_ValueError, "too many dimensions"); return NULL; }
    }
    return PyBytes_FromStringAndSize(desc, p - desc);
}

/* The other end of channel `ch` if it is on this PE (borrowed), else NULL (also with an
 * error set). Found through the location manager and the element's channel table, then
 * kept on `ch` (slots peer, peer_epoch) until a location changes. */
static PyObject *local_peer(Core *c, PyObject *ch, uint32_t tag) {
    PyObject *peer = SLOT(ch, shoal_slots.channel_peer), *epoch = SLOT(ch, shoal_slots.channel_peer_epoch), *now = SLOT(c->locations, shoal_slots.locations_epoch);
    if (!peer || !epoch || !now) return NULL;
    if (peer != Py_None && epoch == now) return peer;
    long dest;
    char packed[8 * MAX_INDEX];
    Py_ssize_t plen;
    unsigned long long coll;
    if (route(c, SLOT(ch, shoal_slots.channel_remote), &dest, packed, &plen, &coll) <= 0 || dest != (long)c->pe) return NULL;
    PyObject *el = element_at(c, coll, (const unsigned char *)packed, (int)(plen / 8));
    peer = el ? channel_of(el, tag) : NULL;
    if (!peer) return NULL; /* not here, or its end is not open yet: look again next time */
    Py_XSETREF(SLOT(ch, shoal_slots.channel_peer), Py_NewRef(peer));
    Py_XSETREF(SLOT(ch, shoal_slots.channel_peer_epoch), Py_NewRef(now));
    return peer;
}

/* `channel.send(*values)`, compiled: keyword-free sends to an element of this PE are
 * delivered at once when they can be (channel_now), others go out by core_send. 1 sent;
 * 0 not handled (Channel._send, the Python path, takes it); -1 error. */
static int channel_send_fast(Core *c, PyObject *ch, PyObject *const *args, Py_ssize_t nargs) {
    if (!SLOT(ch, shoal_slots.channel_sent) || !SLOT(ch, shoal_slots.channel_tag) || !SLOT(ch, shoal_slots.channel_remote)) return 0;
    long seq = PyLong_AsLong(SLOT(ch, shoal_slots.channel_sent));
    if (seq == -1 && PyErr_Occurred()) return -1;
    unsigned long tag = PyLong_AsUnsignedLong(SLOT(ch, shoal_slots.channel_tag));
    if (tag == (unsigned long)-1 && PyErr_Occurred()) return -1;
    int plain = nargs == 1 && plain_array(args[0]);
    if (nargs == 1 && !plain && strided_plain(args[0])) { /* a strided view (a column face): packed, then sent */
        PyObject *packed = PyArray_NewCopy((PyArrayObject *)args[0], NPY_CORDER);
        if (!packed) return -1;
        int r = channel_send_fast(c, ch, &packed, 1);
        Py_DECREF(packed);
        return r;
    }
    if (sample_comm(c, SLOT(ch, shoal_slots.channel_remote), args, nargs) < 0) return -1;
    int r = 0;
    if (plain) { /* to an element of this PE: delivered now, if it can be */
        PyObject *peer = local_peer(c, ch, (uint32_t)tag);
        if (!peer && PyErr_Occurred()) return -1;
        if (peer) {
            PyObject *info = SLOT(SLOT(ch, shoal_slots.channel_remote), shoal_slots.proxy_info), *id = info ? SLOT(info, shoal_slots.info_id) : NULL;
            r = channel_now(c, peer, (uint16_t)seq, args[0], !id || !is_system(id));
        }
    }
    if (r == 0) r = core_send(c, SLOT(ch, shoal_slots.channel_remote), KIND_CHANNEL, (uint16_t)seq, (uint32_t)tag, args, nargs);
    if (r <= 0) return r;
    PyObject *next = PyLong_FromLong((seq + 1) & SEQ_MASK);
    if (!next) return -1;
    Py_XSETREF(SLOT(ch, shoal_slots.channel_sent), next);
    return 1;
}

/* send_value(dest, kind, entry, aux, coll, value) -> bool: one value to another PE, in a
 * message of no element (reductions); False: not handled, use Runtime.post_value's Python. */
PyObject *Core_send_value(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) { PyErr_SetString(PyExc_TypeError, "send_value(dest, kind, entry, aux, coll, value)"); return NULL; }
    long dest = PyLong_AsLong(args[0]), kind = PyLong_AsLong(args[1]), entry = PyLong_AsLong(args[2]);
    unsigned long aux = PyLong_AsUnsignedLong(args[3]);
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (dest == (long)c->pe || dest < 0) Py_RETURN_FALSE;
    int r = send_to(c, dest, (uint8_t)kind, (uint16_t)entry, (uint32_t)aux, coll, NULL, 0, args + 5, 1);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

PyObject *Core_channel_send(Core *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "channel_send(channel, fallback)"); return NULL; }
    return compiled_method(self, args[0], args[1], channel_send_fast);
}

/* An element's ret=True call, made where the user calls it (Runtime.invoke is the
 * reference): a registered future made in the caller's frame, and the call sent with the
 * future's number, to which the element's value replies. 1 sent (*out: the future); 0
 * not a case for the compiled path (a local element, arguments it does not take; the
 * future is forgotten again and the Python path makes its own); -1 error. */
int core_send_ret(Core *c, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, PyObject **out) {
    PyObject *fut = core_new_future(c, 0);
    if (!fut) return -1;
    PyObject *fid = SLOT(fut, shoal_slots.future_fid);
    unsigned long aux = PyLong_AsUnsignedLong(fid);
    int r = aux == (unsigned long)-1 && PyErr_Occurred() ? -1 : core_send(c, proxy, KIND_INVOKE, (uint16_t)entry, (uint32_t)aux, args, nargs);
    if (r == 1) {
        *out = fut;
        return 1;
    }
    if (PyDict_DelItem(c->futures, fid) < 0) { /* FutureTable.forget */
        if (r == 0) r = -1;
        else PyErr_Clear(); /* keep the error of the send */
    }
    Py_DECREF(fut);
    return r;
}

/* send(proxy, entry, aux, *args) -> bool: an entry-method call whose value goes to
 * future `aux` of this PE (ret=True; Runtime.invoke made the future). False: not
 * handled (a local element, arguments the compiled path does not take). */
PyObject *Core_send(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3) { PyErr_SetString(PyExc_TypeError, "send(proxy, entry, aux, *args)"); return NULL; }
    long entry = PyLong_AsLong(args[1]);
    unsigned long aux = PyLong_AsUnsignedLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    int r = core_send(c, args[0], 0, (uint16_t)entry, (uint32_t)aux, args + 3, nargs - 3);
    return r < 0 ? NULL : PyBool_FromLong(r);
}
