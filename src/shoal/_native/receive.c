/* The compiled receive paths (reference: Runtime._deliver, Channel.arrive and the
 * reduction handlers in shoal/_runtime): a frame becomes the entry-method call, the
 * completed channel receive or the reduction step it asks for; this PE's own queue of
 * array calls runs here too. */
#include "core.h"

/* Arrays from an ARRAYS payload (descriptor segment, then one segment per array), each
 * in fresh memory copied from the frame: a new reference to the args tuple, NULL with no
 * error if the payload is not what it should be, or NULL with an error. */
PyObject *rebuild_arrays(Core *c, const char *desc, Py_ssize_t dlen, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    PyObject *key = PyBytes_FromStringAndSize(desc, dlen);
    if (!key) return NULL;
    PyObject *layout = PyDict_GetItemWithError(c->layouts, key);
    if (layout) Py_INCREF(layout);
    else if (!PyErr_Occurred()) layout = PyObject_CallOneArg(c->layout, key);
    Py_DECREF(key);
    if (!layout) return NULL;
    if (!numpy_api_ready()) { /* (the layout's dtypes imported NumPy: its C API failed to load) */
        Py_DECREF(layout);
        PyErr_SetString(PyExc_ImportError, "shoal's compiled core could not load NumPy's C API");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Check(layout) ? PyTuple_GET_SIZE(layout) : -1;
    if (n != nseg) { Py_DECREF(layout); return NULL; }
    PyObject *out = PyTuple_New(n);
    if (!out) { Py_DECREF(layout); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(layout, i);
        PyObject *dtype = PyTuple_GET_ITEM(pair, 0), *shape = PyTuple_GET_ITEM(pair, 1);
        npy_intp dims[NPY_MAXDIMS];
        Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        /* a descriptor may give up to 255 dimensions: more than NumPy's are for the Python path */
        if (nd > NPY_MAXDIMS) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        for (Py_ssize_t k = 0; k < nd; k++) {
            dims[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
            if (dims[k] == -1 && PyErr_Occurred()) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        }
        Py_INCREF(dtype);
        PyObject *a = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)dtype, (int)nd, dims, NULL, NULL, 0, NULL);
        if (!a) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        PyTuple_SET_ITEM(out, i, a);
        if (PyArray_NBYTES((PyArrayObject *)a) != lens[i]) { Py_DECREF(out); Py_DECREF(layout); return NULL; }
        memcpy(PyArray_DATA((PyArrayObject *)a), segs[i], lens[i]);
    }
    Py_DECREF(layout);
    return out;
}

/* The reply of a `ret=True` call: the value to future `fid` of PE `src`, compiled when
 * it can go out as one message, else by Runtime.send_future. 0 or -1. */
static int reply(Core *c, uint32_t src, uint32_t fid, PyObject *value) {
    if (src != c->pe) {
        int sent = send_to(c, (long)src, KIND_FUTURE, 0, fid, NO_COLL, NULL, 0, &value, 1);
        if (sent) return sent < 0 ? -1 : 0;
    }
    PyObject *r = PyObject_CallFunction(c->send_future, "IIO", src, fid, value);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* The value of a `ret=True` call could not be sent (the error is set): the caller gets a
 * TypeError naming the method and element instead, from Runtime._reply_failed. 0 or -1. */
static int reply_failed(Core *c, PyObject *el, PyObject *fn, PyObject *value, uint32_t src, uint32_t fid) {
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *replier = PyObject_CallFunction(c->replier, "II", src, fid);
    PyObject *r = replier ? PyObject_CallMethod(c->rt, "_reply_failed", "OOOOO", el, fn, value, exc, replier) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    Py_XDECREF(replier);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Run `fn(el, *args, **kwargs)` (`kwargs` may be NULL) as the runtime's run_entry does;
 * `fid` not 0: the call's value (or error) goes to future `fid` of PE `src`. */
static int run_entry_to(Core *c, PyObject *el, PyObject *fn, PyObject *args, PyObject *kwargs, uint32_t src, uint32_t fid,
                        Collect *into);

int run_entry(Core *c, PyObject *el, PyObject *fn, PyObject *args, PyObject *kwargs, uint32_t src, uint32_t fid) {
    return run_entry_to(c, el, fn, args, kwargs, src, fid, NULL);
}

static int run_entry_to(Core *c, PyObject *el, PyObject *fn, PyObject *args, PyObject *kwargs, uint32_t src, uint32_t fid,
                        Collect *into) {
    PyObject *vec[MAX_ARGS + 2];
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    PyObject *r;
    c->depth++;
    c->calls++;
    PyObject *caller = c->current;
    c->current = el;
    uint64_t t0 = now_ticks();
    if (nargs <= MAX_ARGS && kwargs == NULL) {
        vec[1] = el;
        for (Py_ssize_t i = 0; i < nargs; i++) vec[i + 2] = PyTuple_GET_ITEM(args, i);
        r = PyObject_Vectorcall(fn, vec + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    } else {
        PyObject *head = PyTuple_Pack(1, el), *all = head ? PySequence_Concat(head, args) : NULL;
        r = all ? PyObject_Call(fn, all, kwargs) : NULL;
        Py_XDECREF(head);
        Py_XDECREF(all);
    }
    uint64_t t1 = now_ticks();
    add_load(c, el, t1 - t0);
    c->current = caller;
    if (--c->depth == 0) c->busy += (double)(t1 - t0);
    if (c->trace_runs) trace_run(c, el, fn, t0, t1); /* a timeline is recorded (SHOAL_TRACE) */
    if (r != NULL && !PyCoro_CheckExact(r)) {
        if (into) {
            int err = PyList_Append(into->collect, r);
            Py_DECREF(r);
            return err;
        }
        int err = fid ? reply(c, src, fid, r) : 0;
        if (err < 0 && PyErr_ExceptionMatches(PyExc_Exception)) err = reply_failed(c, el, fn, r, src, fid);
        Py_DECREF(r);
        return err;
    }
    /* an error or a coroutine: the runtime's handlers, with the replier if there is one */
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    if (r == NULL) { /* taken before any other call */
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
    }
    if (into) into->npending++;
    PyObject *replier = into ? (PyList_Append(into->collect, into->pending) < 0 ? NULL
                                : into->make_reply ? PyObject_CallOneArg(into->make_reply, el) : into->replier(into->ctx, el))
                        : fid ? PyObject_CallFunction(c->replier, "II", src, fid) : Py_NewRef(Py_None);
    PyObject *follow = NULL;
    if (r == NULL) {
        if (replier) follow = PyObject_CallFunctionObjArgs(c->failed, el, fn, value, replier, NULL);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else {
        if (replier) follow = PyObject_CallFunctionObjArgs(c->start_task, el, fn, r, replier, NULL);
        Py_DECREF(r);
    }
    Py_XDECREF(replier);
    if (!follow) return -1;
    Py_DECREF(follow);
    return 0;
}

/* Arguments of a message (an args tuple, new reference), decoded from the frame; NULL
 * with no error set if the compiled path does not decode this one. */
PyObject *decode_args(Core *c, uint8_t kind, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    PyObject *args = NULL;
    if (kind & KIND_ARRAYS) {
        args = rebuild_arrays(c, segs[0], lens[0], segs + 1, lens + 1, nseg - 1);
    } else if (nseg == 1) {
        args = unpickle_simple(segs[0], lens[0]); /* most calls' arguments: no Unpickler */
        if (!args && !PyErr_Occurred()) {
            PyObject *stream = PyBytes_FromStringAndSize(segs[0], lens[0]);
            args = stream ? PyObject_CallOneArg(c->loads, stream) : NULL;
            Py_XDECREF(stream);
        }
    } else {
        /* out-of-band buffers (arrays inside other values): each in fresh, writable memory */
        PyObject *stream = PyBytes_FromStringAndSize(segs[0], lens[0]), *buffers = PyList_New(nseg - 1);
        PyObject *kw = buffers ? Py_BuildValue("{sO}", "buffers", buffers) : NULL;
        for (Py_ssize_t i = 1; kw && i < nseg; i++) {
            PyObject *b = PyByteArray_FromStringAndSize(segs[i], lens[i]);
            if (!b) Py_CLEAR(kw);
            else PyList_SET_ITEM(buffers, i - 1, b);
        }
        PyObject *pos = stream && kw ? PyTuple_Pack(1, stream) : NULL;
        args = pos ? PyObject_Call(c->loads, pos, kw) : NULL;
        Py_XDECREF(pos);
        Py_XDECREF(kw);
        Py_XDECREF(buffers);
        Py_XDECREF(stream);
    }
    if (args && !PyTuple_Check(args)) Py_CLEAR(args);
    if (!args) PyErr_Clear(); /* the Python path decodes it again and reports any error in context */
    return args;
}

/* Element `index` (a tuple of ints) of collection `coll`, if it is on this PE and takes
 * messages now (borrowed); NULL with no error if not, NULL with an error. */
PyObject *element_of(Core *c, uint64_t coll, PyObject *index) {
    PyObject *key = PyLong_FromUnsignedLongLong(coll);
    if (!key) return NULL;
    PyObject *cs = PyDict_GetItemWithError(c->colls, key);
    Py_DECREF(key);
    PyObject *elements = cs ? SLOT(cs, shoal_slots.state_elements) : NULL;
    if (!elements || !PyDict_Check(elements)) return NULL;
    PyObject *el = PyDict_GetItemWithError(elements, index);
    return el && holding(c, el) ? NULL : el;
}

/* Element `index` (nidx int64s as the wire header carries them) of collection `coll`:
 * element_of. */
PyObject *element_at(Core *c, uint64_t coll, const unsigned char *index_bytes, int nidx) {
    PyObject *index = PyTuple_New(nidx);
    if (!index) return NULL;
    for (int i = 0; i < nidx; i++) {
        int64_t v;
        memcpy(&v, index_bytes + 8 * i, 8);
        PyObject *o = PyLong_FromLongLong(v);
        if (!o) { Py_DECREF(index); return NULL; }
        PyTuple_SET_ITEM(index, i, o);
    }
    PyObject *el = element_of(c, coll, index);
    Py_DECREF(index);
    return el;
}

/* Entry method `entry` of element `el` (a new reference); NULL with no error if the
 * element's class has no such entry, NULL with an error. */
static PyObject *entry_of(PyObject *el, long entry) {
    /* the class's tuple, found through the type's attribute cache (an element never has its own) */
    PyObject *funcs = _PyType_Lookup(Py_TYPE(el), shoal_names.funcs); /* borrowed */
    return funcs && PyTuple_Check(funcs) && entry >= 0 && entry < PyTuple_GET_SIZE(funcs)
        ? Py_NewRef(PyTuple_GET_ITEM(funcs, entry)) : NULL;
}

/* A reduction message carrying one value (see Runtime._on_value). */
static int value_deliver(Core *c, uint8_t kind, uint16_t entry, uint32_t src, uint32_t aux, uint64_t coll,
                         const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, Frames *frames) {
    PyObject *args = decode_args(c, kind, segs, lens, nseg);
    if (!args) return 0;
    if (PyTuple_GET_SIZE(args) != 1 || frames_restart(frames)) { Py_DECREF(args); return PyErr_Occurred() ? -1 : 0; }
    if (coll != SYSTEM_ID) c->received++;
    int k = kind & KIND_MASK;
    if (k == KIND_EXCHANGE || (k == KIND_REDUCE && (entry == RET_GATHER || (entry & 0xFF00) == TO_FUTURE || (entry & 0xFF00) == TO_ENTRY))) {
        PyObject *value = PyTuple_GET_ITEM(args, 0);
        int done = k == KIND_EXCHANGE ? exchange_deliver(c, entry, aux, coll, value)
                 : entry == RET_GATHER ? gather_items_deliver(c, aux, coll, value)
                 : contribution_deliver(c, entry, src, aux, coll, value);
        if (done) { Py_DECREF(args); return done; }
    }
    PyObject *r = PyObject_CallFunction(c->on_value, "iIIIKO", kind & KIND_MASK, (unsigned)entry, (unsigned)src, (unsigned)aux,
                                        (unsigned long long)coll, PyTuple_GET_ITEM(args, 0));
    Py_DECREF(args);
    if (!r) return -1;
    Py_DECREF(r);
    return 1;
}

static int deliver_frame(Core *c, const char *frame, Py_ssize_t n, Frames *frames) {
    uint16_t pre[2];
    memcpy(pre, frame, FRAME_PREFIX);
    Py_ssize_t hlen = pre[0], nseg = pre[1];
    Py_ssize_t off = FRAME_PREFIX + FRAME_SEG * nseg;
    if (nseg < 1 || nseg > MAX_ARGS + 1 || hlen < HSIZE || off + hlen > n) return 0;
    const unsigned char *h = (const unsigned char *)frame + off;
    uint8_t kind = h[H_KIND], nidx = h[H_RANK];
    uint16_t entry;
    uint32_t aux;
    uint64_t coll;
    memcpy(&entry, h + H_ENTRY, 2);
    memcpy(&aux, h + H_AUX, 4);
    memcpy(&coll, h + H_COLL, 8);
    if (kind & KIND_FWD) return 0; /* forwarded: the Python path keeps the sender's order */
    int k = kind & KIND_MASK, channel = k == KIND_CHANNEL;
    if (k == KIND_BROADCAST || (k == KIND_REDUCE && entry == RET_BLOCK)) {
        const char *segs[MAX_ARGS + 1];
        Py_ssize_t lens[MAX_ARGS + 1], pos = off + hlen;
        if (nidx > MAX_INDEX || hlen != HSIZE + 8 * nidx) return 0;
        for (Py_ssize_t i = 0; i < nseg; i++) {
            uint64_t w;
            memcpy(&w, frame + FRAME_PREFIX + FRAME_SEG * i, 8);
            if ((w & FRAME_BULK) || (w >> FRAME_SHIFT) > (uint64_t)(n - pos)) return 0;
            segs[i] = frame + pos;
            lens[i] = (Py_ssize_t)(w >> FRAME_SHIFT);
            pos += lens[i];
        }
        if (k == KIND_BROADCAST) return broadcast_deliver(c, (const char *)h, hlen, segs, lens, nseg, frames, NULL);
        return gather_block_deliver(c, aux, coll, h + HSIZE, nidx, segs, lens, nseg, kind, frames);
    }
    int value = k == KIND_EXCHANGE || k == KIND_FUTURE || (k == KIND_REDUCE && entry != 0) || (k == KIND_RESULT && entry == 1);
    int keywords = (kind & KIND_KWARGS) != 0;
    if (!(channel || value || k == KIND_INVOKE) || (keywords && (k != KIND_INVOKE || (kind & KIND_ARRAYS))) ||
        nidx > MAX_INDEX || hlen != HSIZE + 8 * nidx)
        return 0;
    const char *segs[MAX_ARGS + 1];
    Py_ssize_t lens[MAX_ARGS + 1];
    Py_ssize_t pos = off + hlen;
    for (Py_ssize_t i = 0; i < nseg; i++) {
        uint64_t w;
        memcpy(&w, frame + FRAME_PREFIX + FRAME_SEG * i, 8);
        /* compared before it is added: a length word past the frame must not wrap `pos` */
        if ((w >> FRAME_SHIFT) > (uint64_t)(n - pos)) return 0;
        segs[i] = frame + pos;
        lens[i] = (Py_ssize_t)(w >> FRAME_SHIFT);
        pos += lens[i];
    }

    if (value) {
        uint32_t src; /* the sender: a reduction combines its children's values in PE order */
        memcpy(&src, h + H_SRC, 4);
        return value_deliver(c, kind, entry, src, aux, coll, segs, lens, nseg, frames);
    }

    /* the element, if it is here (else the Python path forwards, holds or fails) */
    PyObject *el = element_at(c, coll, h + HSIZE, nidx);
    if (!el) return PyErr_Occurred() ? -1 : 0;
    if (channel) return channel_deliver(c, el, kind, entry, aux, coll, segs, lens, nseg, frames);
    PyObject *fn = entry_of(el, entry);
    if (!fn) return PyErr_Occurred() ? -1 : 0;

    /* the arguments, out of the receive buffer; then it can take the next frame */
    PyObject *args = decode_args(c, kind & ~KIND_KWARGS, segs, lens, nseg), *kwargs = NULL;
    if (args && keywords) { /* the pickle holds (args, kwargs) */
        PyObject *pair = args;
        if (PyTuple_GET_SIZE(pair) == 2 && PyTuple_Check(PyTuple_GET_ITEM(pair, 0)) && PyDict_Check(PyTuple_GET_ITEM(pair, 1))) {
            args = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
            kwargs = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        } else {
            args = NULL;
        }
        Py_DECREF(pair);
    }
    if (!args) {
        Py_DECREF(fn);
        return 0;
    }
    Py_INCREF(el);
    uint32_t src; /* read before the restart: then a peer may write the next frame here at any time */
    memcpy(&src, h + H_SRC, 4);
    int err = frames_restart(frames);
    if (!err) {
        if (coll != SYSTEM_ID) c->received++;
        err = run_entry(c, el, fn, args, kwargs, src, aux);
    }
    Py_DECREF(el);
    Py_DECREF(fn);
    Py_DECREF(args);
    Py_XDECREF(kwargs);
    return err ? -1 : 1;
}

/* Run what the engine's ready queue holds now (Runtime.step's last loop): the coroutines
 * that the entry method just run woke (Task._wake queues them inside one). Outside any
 * entry method only, as the engine would next; each once, in order. 0 or -1. */
static int run_ready(Core *c) {
    Py_ssize_t n = PyObject_Length(c->ready);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fn = PyObject_CallMethodNoArgs(c->ready, shoal_names.popleft);
        PyObject *r = fn ? PyObject_CallNoArgs(fn) : NULL;
        Py_XDECREF(fn);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return n < 0 ? -1 : 0;
}

/* A received frame to the runtime (the frames' hook): 1 taken, 0 the Python path's, -1
 * error. What it woke runs before the next frame, not after a trip back to the engine. */
int core_deliver(Core *c, const char *frame, Py_ssize_t n, Frames *frames) {
    int r = deliver_frame(c, frame, n, frames);
    if (r > 0 && c->depth == 0 && run_ready(c) < 0) return -1;
    return r;
}

#define LOCAL_BATCH 64

/* run_local(deliver, deliver_direct) -> count: the messages queued for this PE's own
 * elements when it was called (Runtime.step's local loop). Array calls of elements that
 * are here run in C; the rest go to deliver(header, segments) or
 * deliver_direct(coll, index, entry, args), the Python handlers. Only this loop takes
 * items out of the queue, so the count it starts with holds while its calls run (a
 * departure among them leaves migration.SENT_ON, (None, None), for each message it sends
 * on): a queue found shorter is a broken invariant, reported as such. */
PyObject *Core_run_local(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "run_local(deliver, deliver_direct)"); return NULL; }
    Py_ssize_t n = PyObject_Length(c->local), k;
    if (n < 0) return NULL;
    for (k = 0;; k++) {
        if (k >= n) { /* the queue as it was is done: go on while more came, up to a batch */
            Py_ssize_t more = k < LOCAL_BATCH ? PyObject_Length(c->local) : 0;
            if (more < 0) return NULL;
            if (more == 0) break;
        }
        PyObject *item = PyObject_CallNoArgs(c->local_popleft);
        if (!item) {
            if (k < n && PyErr_ExceptionMatches(PyExc_IndexError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_RuntimeError,
                             "PE %u: the local queue is empty where its count says %zd message(s) wait (in "
                             "Runtime.step's local loop, compiled path: run_local, after %zd of the %zd queued "
                             "when it began): only that loop may take messages out of the queue (a departing "
                             "element's messages leave migration.SENT_ON in their place)",
                             (unsigned)c->pe, n - k, k, n);
            }
            return NULL;
        }
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_RuntimeError, "PE %u: the local queue holds %R where a (header, body) pair belongs "
                         "(in Runtime.step's local loop, compiled path: run_local)", (unsigned)c->pe, item);
            Py_DECREF(item);
            return NULL;
        }
        PyObject *header = PyTuple_GET_ITEM(item, 0), *body = PyTuple_GET_ITEM(item, 1);
        PyObject *r = NULL;
        if (header != Py_None) {
            int done = local_channel(c, header, body);
            if (done == 0) done = local_broadcast(c, header, body);
            if (done < 0) { Py_DECREF(item); return NULL; }
            r = done ? Py_NewRef(Py_None) : PyObject_CallFunctionObjArgs(args[0], header, body, NULL);
        } else if (body == Py_None) { /* migration.SENT_ON: sent on after its element, which left */
            r = Py_NewRef(Py_None);
        } else if (!PyTuple_CheckExact(body) || PyTuple_GET_SIZE(body) != 4) {
            PyErr_Format(PyExc_RuntimeError, "PE %u: the local queue holds a direct call %R that is not "
                         "(coll, index, entry, args) (in Runtime.step's local loop, compiled path: run_local)",
                         (unsigned)c->pe, body);
        } else {
            PyObject *coll = PyTuple_GET_ITEM(body, 0), *index = PyTuple_GET_ITEM(body, 1);
            PyObject *cs = PyDict_GetItemWithError(c->colls, coll);
            PyObject *elements = cs ? SLOT(cs, shoal_slots.state_elements) : NULL;
            PyObject *el = elements && PyDict_Check(elements) ? PyDict_GetItemWithError(elements, index) : NULL;
            if (el && holding(c, el)) el = NULL;
            long entry = el ? PyLong_AsLong(PyTuple_GET_ITEM(body, 2)) : -1;
            PyObject *fn = el && !(entry == -1 && PyErr_Occurred()) ? entry_of(el, entry) : NULL;
            if (fn) {
                Py_INCREF(el);
                if (!is_system(coll)) c->received++;
                int err = run_entry(c, el, fn, PyTuple_GET_ITEM(body, 3), NULL, 0, 0);
                Py_DECREF(el);
                Py_DECREF(fn);
                r = err ? NULL : Py_NewRef(Py_None);
            } else if (!PyErr_Occurred()) {
                r = PyObject_Call(args[1], body, NULL); /* not here (yet): the Python path */
            }
        }
        Py_DECREF(item);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    return PyLong_FromSsize_t(k);
}

/* run_each(elements, entry, args, kwargs[, results, make_reply, pending]) -> None | int: entry
 * method `entry` on every element of the list (a broadcast's local part;
 * Runtime._broadcast_here). Without `results` the values are dropped and an exception
 * goes to the runtime's error handler, as each call's would. With it (a ret=True
 * broadcast), each element's value is appended to `results`, in order; an element whose
 * call raised or returned a coroutine gets `pending` there instead, and its outcome goes
 * to the replier `make_reply(el)`; the count of those is returned. */
PyObject *Core_run_each(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 4 && nargs != 7) || !PyList_Check(args[0]) || !PyTuple_Check(args[2]) || (nargs == 7 && !PyList_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, "run_each(elements: list, entry, args: tuple, kwargs: dict | None"
                                         "[, results: list, make_reply, pending])");
        return NULL;
    }
    long entry = PyLong_AsLong(args[1]);
    if (entry == -1 && PyErr_Occurred()) return NULL;
    Collect into = {0};
    if (nargs == 7) into = (Collect){args[4], args[5], args[6], 0, NULL, NULL};
    if (run_each_into(c, args[0], entry, args[2], args[3] == Py_None ? NULL : args[3], nargs == 7 ? &into : NULL) < 0)
        return NULL;
    if (nargs == 7) return PyLong_FromSsize_t(into.npending);
    Py_RETURN_NONE;
}

int run_each_into(Core *c, PyObject *elements, long entry, PyObject *args, PyObject *kwargs, Collect *into) {
    /* the class's entry table `fn` was taken from: elements are mostly of one class, and a
     * call may swap the table (conditions.py), so it is compared by identity, per element */
    PyObject *funcs = NULL, *fn = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(elements); i++) {
        PyObject *el = Py_NewRef(PyList_GET_ITEM(elements, i)); /* owned: entry_of may run Python code */
        PyObject *table = _PyType_Lookup(Py_TYPE(el), shoal_names.funcs);
        if (!table || table != funcs) {
            Py_CLEAR(fn);
            Py_XSETREF(funcs, Py_XNewRef(table)); /* held: no other tuple can take its address */
            if (!(fn = entry_of(el, entry))) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_IndexError, "entry method #%ld of %R", entry, el);
                Py_DECREF(el);
                Py_XDECREF(funcs);
                return -1;
            }
        }
        int err = run_entry_to(c, el, fn, args, kwargs, 0, 0, into);
        Py_DECREF(el);
        if (err) {
            Py_DECREF(fn);
            Py_XDECREF(funcs);
            return -1;
        }
    }
    Py_XDECREF(fn);
    Py_XDECREF(funcs);
    return 0;
}
