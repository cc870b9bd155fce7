/* Broadcasts, compiled (reference: Receiving._on_broadcast and _broadcast_here, and for
 * ret=True broadcasts the gathering of the values in ReductionManager: contribute_block,
 * add, _maybe_done, in shoal/_runtime).
 *
 * A broadcast to a complete collection reaches each PE as one message: the PE passes it
 * on to its children in the tree of all PEs, then calls the entry method on each of its
 * elements. Here that happens without entering Python, for messages from the network and
 * from this PE's own queue alike. Of a ret=True broadcast to a dense collection whose
 * elements on this PE are still its block in order (CollectionState.first), the values
 * are gathered here too: this PE's block and its children's replies in the collection's
 * reduction tree, sent on to the parent as one message (a lone block as its values alone,
 * RET_BLOCK), and at the root put in element order and handed to the caller's future.
 *
 * The Python reference stays the owner of every other case. When an element's call is
 * still pending (it raised, or is a coroutine), this PE's gather goes over to the Python
 * manager (ReductionManager.ret_adopt), with whatever its children had sent; a reply for
 * a gather the core does not hold goes the Python way too (ReductionManager.receive_compact
 * and Receiving._on_reduce read both reply formats). */
#include "core.h"

/* One PE's part in gathering the values of one ret=True broadcast. */
typedef struct Gather {
    struct Gather *next;
    uint64_t coll;
    uint32_t src, fid;
    uint16_t entry;    /* the entry method called */
    Py_ssize_t got, expected;
    long parent;       /* in the collection's reduction tree; -1 at its root */
    PyObject *blocks;  /* [(first, [values])]: this PE's block and lone blocks of children */
    PyObject *others;  /* Blocks and (index, value) pairs that children sent as lists */
    PyObject *parts;   /* each child's reply, as sent (for a hand-over to Python) */
    PyObject *elements, *mine; /* this PE's elements and their values (to name one that cannot be sent) */
    PyObject *shape;   /* the collection's shape */
    PyObject *domain, *target; /* made when Python needs them (ReductionManager.ret_key) */
} Gather;

struct Broadcasts {
    PyObject *manager;      /* the ReductionManager */
    PyObject *tree_from;    /* rt.tree_from(root) -> Tree */
    PyObject *holding;      /* rt.balancer.holding: Arrays whose broadcasts their root holds */
    PyObject *block_cls;    /* partials.Block */
    PyObject *pending;      /* partials.PENDING */
    PyObject *partials;     /* the manager's partials (a dict; while empty it holds no gather) */
    long tree_root;         /* the root whose children `tree_children` are */
    PyObject *tree_children;
    Gather *list;
};

static void gather_free(Gather *g) {
    Py_XDECREF(g->blocks);
    Py_XDECREF(g->others);
    Py_XDECREF(g->parts);
    Py_XDECREF(g->elements);
    Py_XDECREF(g->mine);
    Py_XDECREF(g->shape);
    Py_XDECREF(g->domain);
    Py_XDECREF(g->target);
    PyMem_Free(g);
}

void broadcasts_free(Broadcasts *b) {
    if (!b) return;
    while (b->list) {
        Gather *g = b->list;
        b->list = g->next;
        gather_free(g);
    }
    Py_XDECREF(b->manager);
    Py_XDECREF(b->tree_from);
    Py_XDECREF(b->holding);
    Py_XDECREF(b->block_cls);
    Py_XDECREF(b->pending);
    Py_XDECREF(b->partials);
    Py_XDECREF(b->tree_children);
    PyMem_Free(b);
}

static Gather *gather_find(Broadcasts *b, uint64_t coll, uint32_t src, uint32_t fid) {
    for (Gather *g = b->list; g; g = g->next)
        if (g->coll == coll && g->src == src && g->fid == fid) return g;
    return NULL;
}

static void gather_unlink(Broadcasts *b, Gather *gone) {
    for (Gather **p = &b->list; *p; p = &(*p)->next)
        if (*p == gone) { *p = gone->next; return; }
}

/* g->domain and g->target, made by the manager (0, or -1 with an error). */
static int gather_key(Broadcasts *b, Gather *g) {
    if (g->domain) return 0;
    PyObject *key = PyObject_CallMethod(b->manager, "ret_key", "KII", (unsigned long long)g->coll, g->src, g->fid);
    if (!key) return -1;
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 2) {
        Py_DECREF(key);
        PyErr_SetString(PyExc_TypeError, "ReductionManager.ret_key must return (domain, target)");
        return -1;
    }
    g->domain = Py_NewRef(PyTuple_GET_ITEM(key, 0));
    g->target = Py_NewRef(PyTuple_GET_ITEM(key, 1));
    Py_DECREF(key);
    return 0;
}

/* Which gather a pending call belongs to (not the Gather itself: the calls run Python
 * code, which may destroy the collection and with it the gather). */
typedef struct {
    uint64_t coll;
    uint32_t src, fid;
    uint16_t entry;
} GatherKey;

/* The replier of an element whose call is pending: Receiving.contributor(domain, el, target, None, entry). */
static PyObject *pending_replier(void *ctx, PyObject *el) {
    GatherKey *k = ctx;
    Broadcasts *b = active ? active->broadcasts : NULL;
    if (!b) {
        PyErr_SetString(PyExc_RuntimeError, "a compiled broadcast without its core");
        return NULL;
    }
    PyObject *key = PyObject_CallMethod(b->manager, "ret_key", "KII", (unsigned long long)k->coll, k->src, k->fid);
    if (!key) return NULL;
    PyObject *r = PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 2
                      ? PyObject_CallMethod(active->rt, "contributor", "OOOOi", PyTuple_GET_ITEM(key, 0), el,
                                            PyTuple_GET_ITEM(key, 1), Py_None, (int)k->entry)
                      : NULL;
    if (!r && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "ReductionManager.ret_key must return (domain, target)");
    Py_DECREF(key);
    return r;
}

/* Append the items reducers.gather combines for `pair` = (first, values) to `items`: a
 * dense array's Block (its PENDING values come later as pairs); a Group's (shape None)
 * (index, value) pairs, as Python's path makes them. 0 or -1. */
static int add_items(Broadcasts *b, PyObject *items, PyObject *pair, PyObject *shape) {
    PyObject *first = PyTuple_GET_ITEM(pair, 0), *values = PyTuple_GET_ITEM(pair, 1);
    if (shape != Py_None) {
        PyObject *block = PyObject_CallFunctionObjArgs(b->block_cls, first, values, shape, NULL);
        int r = block ? PyList_Append(items, block) : -1;
        Py_XDECREF(block);
        return r;
    }
    long at = PyLong_AsLong(first);
    if (at == -1 && PyErr_Occurred()) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (v == b->pending) continue;
        PyObject *item = Py_BuildValue("(lO)", at + (long)i, v);
        int r = item ? PyList_Append(items, item) : -1;
        Py_XDECREF(item);
        if (r < 0) return -1;
    }
    return 0;
}

/* Every part as one list of Blocks and pairs (what reducers.gather combines). */
static PyObject *gather_items(Broadcasts *b, Gather *g) {
    PyObject *items = PyList_New(0);
    for (Py_ssize_t i = 0; items && i < PyList_GET_SIZE(g->blocks); i++)
        if (add_items(b, items, PyList_GET_ITEM(g->blocks, i), g->shape) < 0) Py_CLEAR(items);
    if (items && PyList_SetSlice(items, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, g->others) < 0) Py_CLEAR(items);
    return items;
}

static int by_first(const void *x, const void *y) {
    PyObject *a = PyTuple_GET_ITEM(*(PyObject *const *)x, 0), *b = PyTuple_GET_ITEM(*(PyObject *const *)y, 0);
    Py_ssize_t i = PyLong_AsSsize_t(a), j = PyLong_AsSsize_t(b);
    return (i > j) - (i < j);
}

/* The caller's future, of this PE, resolved with `result` (Runtime.send_future's local
 * case, Future._resolve): 1 done; 0 the Python way (not a plain pending Future here); -1 error. */
int resolve_here(Core *c, uint32_t fid, PyObject *result) {
    PyObject *key = PyLong_FromUnsignedLong(fid);
    if (!key) return -1;
    PyObject *fut = PyDict_GetItemWithError(c->futures, key);
    int pending = fut && Py_IS_TYPE(fut, (PyTypeObject *)c->future_cls) ? future_pending(c, fut) : 0;
    if (pending != 1) {
        Py_DECREF(key);
        return pending < 0 || PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(fut);
    int err = PyDict_DelItem(c->futures, key); /* FutureTable.forget */
    Py_DECREF(key);
    if (!err) {
        Py_XSETREF(SLOT(fut, shoal_slots.future_value), Py_NewRef(result));
        future_set_done(c, fut);
        PyObject *callbacks = SLOT(fut, shoal_slots.future_callbacks);
        if (callbacks && callbacks != Py_None) {
            SLOT(fut, shoal_slots.future_callbacks) = Py_NewRef(Py_None); /* the list's reference is now ours */
            for (Py_ssize_t i = 0; !err && PyList_Check(callbacks) && i < PyList_GET_SIZE(callbacks); i++) {
                PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(callbacks, i), fut);
                if (r) Py_DECREF(r); else err = -1;
            }
            Py_DECREF(callbacks);
        }
    }
    Py_DECREF(fut);
    return err ? -1 : 1;
}

/* Every value is here: to the parent, or (the root) to the caller's future. 0 or -1. */
static int gather_send(Core *c, Broadcasts *b, Gather *g) {
    if (g->parent >= 0) {
        if (PyList_GET_SIZE(g->others) == 0 && PyList_GET_SIZE(g->blocks) == 1) {
            /* a lone block: its values as the message's arguments, (src, first) as its index */
            PyObject *pair = PyList_GET_ITEM(g->blocks, 0), *values = PyTuple_GET_ITEM(pair, 1);
            int64_t index[2] = {g->src, PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0))};
            if (index[1] == -1 && PyErr_Occurred()) return -1;
            Py_ssize_t n = PyList_GET_SIZE(values);
            if (n <= MAX_ARGS) {
                int sent = send_to(c, g->parent, KIND_REDUCE, RET_BLOCK, g->fid, g->coll, (const char *)index,
                                   sizeof index, PySequence_Fast_ITEMS(values), n);
                if (sent) return sent < 0 ? -1 : 0;
            }
        }
        PyObject *items = gather_items(b, g);
        PyObject *src = items ? PyLong_FromUnsignedLong(g->src) : NULL;
        PyObject *value = src ? PyTuple_Pack(2, src, items) : NULL;
        Py_XDECREF(src);
        Py_XDECREF(items);
        if (!value) return -1;
        int sent = send_to(c, g->parent, KIND_REDUCE, RET_GATHER, g->fid, g->coll, NULL, 0, &value, 1);
        if (sent == 0) { /* not sendable as one frame of the compiled path: Runtime.post_value */
            PyObject *r = PyObject_CallMethod(c->rt, "post_value", "liIIKO", g->parent, KIND_REDUCE, RET_GATHER, g->fid,
                                              (unsigned long long)g->coll, value);
            sent = r ? 1 : -1;
            Py_XDECREF(r);
        }
        Py_DECREF(value);
        return sent < 0 ? -1 : 0;
    }
    PyObject *r;
    if (PyList_GET_SIZE(g->others) == 0) { /* blocks only: their values in element order */
        PyObject *blocks = g->blocks, *result = PyList_New(0);
        qsort(PySequence_Fast_ITEMS(blocks), (size_t)PyList_GET_SIZE(blocks), sizeof(PyObject *), by_first);
        if (PyErr_Occurred()) { Py_XDECREF(result); return -1; }
        for (Py_ssize_t i = 0; result && i < PyList_GET_SIZE(blocks); i++)
            if (PyList_SetSlice(result, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, PyTuple_GET_ITEM(PyList_GET_ITEM(blocks, i), 1)) < 0)
                Py_CLEAR(result);
        if (!result) return -1;
        int here = g->src == c->pe ? resolve_here(c, g->fid, result) : 0;
        r = here < 0 ? NULL : here ? Py_NewRef(Py_None) : PyObject_CallFunction(c->send_future, "IIO", g->src, g->fid, result);
        Py_DECREF(result);
    } else { /* pairs among them (an element's call was pending somewhere): the Python way */
        PyObject *items = gather_items(b, g);
        if (!items) return -1;
        r = gather_key(b, g) < 0 ? NULL : PyObject_CallMethodObjArgs(b->manager, shoal_names.ret_gathered, g->domain, g->target, items, NULL);
        Py_DECREF(items);
    }
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* gather_send, and if a value of this PE's elements cannot be sent (an Exception is set),
 * the caller hears which element's value, of which entry method, as from one element's
 * call (ReductionManager.ret_unsendable; Receiving._reply_failed on the Python path).
 * 0 or -1 (an error that is not a value's, or none of this PE's values is at fault). */
static int gather_done(Core *c, Broadcasts *b, Gather *g) {
    if (gather_send(c, b, g) == 0) return 0;
    if (!g->mine || !PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb) PyException_SetTraceback(exc, tb);
    PyObject *src = PyLong_FromUnsignedLong(g->src), *fid = src ? PyLong_FromUnsignedLong(g->fid) : NULL;
    PyObject *entry = fid ? PyLong_FromLong(g->entry) : NULL;
    PyObject *told = entry ? PyObject_CallMethodObjArgs(b->manager, shoal_names.ret_unsendable, src, fid, entry, g->elements,
                                                        g->mine, exc, NULL)
                           : NULL;
    Py_XDECREF(src);
    Py_XDECREF(fid);
    Py_XDECREF(entry);
    if (told == Py_True) {
        Py_DECREF(told);
        Py_XDECREF(type);
        Py_XDECREF(exc);
        Py_XDECREF(tb);
        return 0;
    }
    if (!told) { /* reporting failed: its error stands */
        Py_XDECREF(type);
        Py_XDECREF(exc);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(told);
    PyErr_Restore(type, exc, tb);
    return -1;
}

/* Count one arrival; the last completes the gather (removed first). 0 or -1. */
static int gather_arrived(Core *c, Broadcasts *b, Gather *g, Py_ssize_t count) {
    g->got += count;
    if (g->got < g->expected) return 0;
    gather_unlink(b, g);
    int r = gather_done(c, b, g);
    gather_free(g);
    return r;
}

/* Whether the manager gathers the replies of ret=True broadcast `fid` of PE `src` to `coll`
 * here (ReductionManager.holds_replies): 1, 0, or -1 on error. */
static int manager_holds_replies(Broadcasts *b, uint64_t coll, uint32_t src, uint32_t fid) {
    PyObject *c = PyLong_FromUnsignedLongLong(coll), *s = PyLong_FromUnsignedLong(src), *f = PyLong_FromUnsignedLong(fid);
    PyObject *r = c && s && f ? PyObject_CallMethodObjArgs(b->manager, shoal_names.holds_replies, c, s, f, NULL) : NULL;
    Py_XDECREF(c);
    Py_XDECREF(s);
    Py_XDECREF(f);
    int held = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return held;
}

/* The segments as a list of bytes (new reference), or NULL with an error. */
static PyObject *segment_copies(const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    PyObject *list = PyList_New(nseg);
    for (Py_ssize_t i = 0; list && i < nseg; i++) {
        PyObject *seg = PyBytes_FromStringAndSize(segs[i], lens[i]);
        if (!seg) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, seg);
    }
    return list;
}

/* The elements of this PE, a list in block order (new reference), or NULL without error. */
static PyObject *local_elements(Core *c, PyObject *cs) {
    PyObject *elements = SLOT(cs, shoal_slots.state_elements);
    if (!elements || !PyDict_Check(elements) || PyDict_GET_SIZE(elements) == 0) return NULL;
    return PyDict_Values(elements);
}

/* A BROADCAST message (header `h` of `hlen` bytes, segments `segs`): passed on and run
 * here. `frames`: its frame is in the receive buffer (restarted once read); NULL for one
 * of this PE's own queue, whose segments `pysegs` (a list) are sent on as they are.
 * 1 done; 0 for the Python path (nothing was done); -1 error. */
int broadcast_deliver(Core *c, const char *h, Py_ssize_t hlen, const char *const *segs, const Py_ssize_t *lens,
                      Py_ssize_t nseg, Frames *frames, PyObject *pysegs) {
    Broadcasts *b = c->broadcasts;
    uint8_t kind = (uint8_t)h[H_KIND];
    uint16_t entry;
    uint32_t src, aux;
    uint64_t coll;
    memcpy(&entry, h + H_ENTRY, 2);
    memcpy(&src, h + H_SRC, 4);
    memcpy(&aux, h + H_AUX, 4);
    memcpy(&coll, h + H_COLL, 8);
    if (!b || (kind & (KIND_KWARGS | KIND_FWD)) || hlen != HSIZE) return 0;
    /* the collection, complete here, not held by a balancing round at its root */
    PyObject *key = PyLong_FromUnsignedLongLong(coll);
    if (!key) return -1;
    PyObject *cs = PyDict_GetItemWithError(c->colls, key);
    Py_DECREF(key);
    if (!cs) return PyErr_Occurred() ? -1 : 0;
    PyObject *info = SLOT(cs, shoal_slots.state_info), *root_obj = info ? SLOT(info, shoal_slots.info_root) : NULL;
    if (SLOT(cs, shoal_slots.state_done) != Py_True || !root_obj) return 0;
    long root = PyLong_AsLong(root_obj);
    if (root == -1 && PyErr_Occurred()) return -1;
    if (root == (long)c->pe && PySet_Check(b->holding) && PySet_GET_SIZE(b->holding) > 0) return 0;
    /* a ret=True broadcast is gathered here if the elements are the PE's block, in order */
    PyObject *span = NULL;
    long first = -1;
    Py_ssize_t count = 0;
    if (aux) {
        PyObject *first_obj = SLOT(cs, shoal_slots.state_first), *count_obj = SLOT(cs, shoal_slots.state_count);
        span = SLOT(cs, shoal_slots.state_span);
        first = first_obj ? PyLong_AsLong(first_obj) : -1;
        count = count_obj ? PyLong_AsSsize_t(count_obj) : -1;
        if (PyErr_Occurred()) return -1;
        if (count < 0 || !span || span == Py_None || !SLOT(span, shoal_slots.tree_children) ||
            !PyTuple_Check(SLOT(span, shoal_slots.tree_children)) || !SLOT(span, shoal_slots.tree_parent) || !SLOT(info, shoal_slots.info_shape))
            return 0;
        /* a child's reply that came before the broadcast went the Python way (the core held
         * no gather then): the broadcast goes that way too, so that one path gathers it */
        int held = PyDict_GET_SIZE(b->partials) ? manager_holds_replies(b, coll, src, aux) : 0;
        if (held) return held < 0 ? -1 : 0;
    }
    PyObject *elements = local_elements(c, cs);
    if (!elements) return PyErr_Occurred() ? -1 : 0;
    if (aux && first < 0 && SLOT(info, shoal_slots.info_shape) == Py_None && count == 1 && PyList_GET_SIZE(elements) == 1) {
        /* a Group's element: its value goes by its index, the PE (as a pair on the Python path) */
        PyObject *index = PyObject_GetAttr(PyList_GET_ITEM(elements, 0), shoal_names.index);
        first = index && PyLong_CheckExact(index) ? PyLong_AsLong(index) : -1;
        Py_XDECREF(index);
        if (PyErr_Occurred()) { Py_DECREF(elements); return -1; }
    }
    if (aux && (first < 0 || PyList_GET_SIZE(elements) != count)) { Py_DECREF(elements); return 0; }
    PyObject *args = decode_args(c, kind, segs, lens, nseg);
    if (!args) { Py_DECREF(elements); return PyErr_Occurred() ? -1 : 0; }
    /* the PEs it goes on to: children in the tree of all PEs from the collection's root */
    if (b->tree_root != root || !b->tree_children) {
        PyObject *tree = PyObject_CallFunction(b->tree_from, "l", root);
        PyObject *children = tree ? SLOT(tree, shoal_slots.tree_children) : NULL;
        if (!children || !PyTuple_Check(children)) {
            if (tree && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Runtime.tree_from gave no children");
            Py_XDECREF(tree);
            Py_DECREF(elements);
            Py_DECREF(args);
            return -1;
        }
        Py_XSETREF(b->tree_children, Py_NewRef(children));
        b->tree_root = root;
        Py_DECREF(tree);
    }
    /* ret=True: this PE's gather, made before the message is passed on (sending a large one
     * lets messages in, a child's reply among them) and before any call runs */
    Gather *g = NULL;
    PyObject *values = NULL;
    if (aux) {
    g = PyMem_Calloc(1, sizeof(Gather));
    if (!g) { Py_DECREF(elements); Py_DECREF(args); PyErr_NoMemory(); return -1; }
    g->coll = coll;
    g->src = src;
    g->fid = aux;
    g->entry = entry;
    g->elements = Py_NewRef(elements);
    g->expected = count + PyTuple_GET_SIZE(SLOT(span, shoal_slots.tree_children));
    g->parent = PyLong_AsLong(SLOT(span, shoal_slots.tree_parent));
    g->blocks = PyList_New(0);
    g->others = PyList_New(0);
    g->parts = PyList_New(0);
    g->shape = Py_XNewRef(info ? SLOT(info, shoal_slots.info_shape) : NULL);
    values = PyList_New(0);
    if (!g->blocks || !g->others || !g->parts || !g->shape || !values || PyErr_Occurred()) {
        gather_free(g);
        Py_XDECREF(values);
        Py_DECREF(elements);
        Py_DECREF(args);
        return -1;
    }
    g->next = b->list;
    b->list = g;
    }
    /* pass it on: a frame as it came, with no Python code run before its receive restarts
     * (one the eager path would not take goes on as copies, after the restart) */
    int err = 0;
    PyObject *children = Py_NewRef(b->tree_children), *copies = NULL;
    Py_ssize_t nchildren = PyTuple_GET_SIZE(children);
    char *later = nchildren ? PyMem_Calloc((size_t)nchildren, 1) : NULL;
    if (nchildren && !later) { PyErr_NoMemory(); err = -1; }
    for (Py_ssize_t i = 0; !err && i < nchildren; i++) {
        long child = PyLong_AsLong(PyTuple_GET_ITEM(children, i));
        int sent = child < 0 ? -1 : frames ? frames_send_inline(c->frames, (int)child, h, hlen, segs, lens, nseg)
                                           : send_segments(c, child, h, hlen, pysegs);
        if (sent == 0) later[i] = 1;
        else if (sent < 0) err = -1;
        else if (coll != SYSTEM_ID) c->sent++;
    }
    for (Py_ssize_t i = 0; !err && i < nchildren; i++)
        if (later[i] && !copies && !(copies = segment_copies(segs, lens, nseg))) err = -1;
    /* the header too is read before the restart: once the receive buffer is free, a peer
     * may write the next frame into it at any time (Open MPI's single-copy transfers) */
    char header[HSIZE];
    memcpy(header, h, HSIZE);
    if (!err && frames && frames_restart(frames)) err = -1;
    for (Py_ssize_t i = 0; !err && i < nchildren; i++) {
        if (!later[i]) continue;
        if (send_segments(c, PyLong_AsLong(PyTuple_GET_ITEM(children, i)), header, hlen, copies) < 0) err = -1;
        else if (coll != SYSTEM_ID) c->sent++;
    }
    PyMem_Free(later);
    Py_XDECREF(copies);
    Py_DECREF(children);
    if (err) { /* the gather, if sending let a message destroy the collection meanwhile, is gone */
        if (g && (g = gather_find(b, coll, src, aux))) { gather_unlink(b, g); gather_free(g); }
        Py_XDECREF(values);
        Py_DECREF(elements);
        Py_DECREF(args);
        return -1;
    }
    if (coll != SYSTEM_ID) c->received++;
    if (!aux) {
        err = run_each_into(c, elements, entry, args, NULL, NULL);
        Py_DECREF(elements);
        Py_DECREF(args);
        return err < 0 ? -1 : 1;
    }
    GatherKey which = {coll, src, aux, entry};
    Collect into = {values, NULL, b->pending, 0, pending_replier, &which};
    err = run_each_into(c, elements, entry, args, NULL, &into);
    Py_DECREF(elements);
    Py_DECREF(args);
    g = c->broadcasts == b ? gather_find(b, coll, src, aux) : NULL; /* the calls may have destroyed the collection */
    if (err < 0 || !g) {
        if (g) { gather_unlink(b, g); gather_free(g); }
        Py_DECREF(values);
        return err < 0 ? -1 : 1;
    }
    PyObject *first_obj = PyLong_FromLong(first);
    PyObject *pair = first_obj ? PyTuple_Pack(2, first_obj, values) : NULL;
    Py_XDECREF(first_obj);
    Py_DECREF(values);
    if (!pair) return -1;
    if (into.npending) { /* the Python manager takes this gather over */
        gather_unlink(b, g);
        PyObject *items = gather_key(b, g) < 0 ? NULL : PyList_New(0);
        PyObject *values_in = items && add_items(b, items, pair, g->shape) == 0 ? PyLong_FromSsize_t(count - into.npending) : NULL;
        PyObject *r = values_in ? PyObject_CallMethodObjArgs(b->manager, shoal_names.ret_adopt, g->domain, g->target, items,
                                                              values_in, g->parts, NULL)
                                : NULL;
        Py_XDECREF(values_in);
        Py_XDECREF(items);
        Py_DECREF(pair);
        gather_free(g);
        if (!r) return -1;
        Py_DECREF(r);
        return 1;
    }
    g->mine = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    err = PyList_Append(g->blocks, pair);
    Py_DECREF(pair);
    if (err < 0) return -1;
    return gather_arrived(c, b, g, count) < 0 ? -1 : 1;
}

/* A child's reply: `blocks` (a (first, values) pair, or NULL) or `items` (a list, or
 * NULL), for gather (coll, src, fid) if the core holds it; `sent` is the reply as it
 * came, kept for a hand-over. 1 taken; 0 not held here; -1 error. */
static int gather_reply(Core *c, uint64_t coll, uint32_t src, uint32_t fid, PyObject *pair, PyObject *items, PyObject *sent) {
    Broadcasts *b = c->broadcasts;
    Gather *g = b ? gather_find(b, coll, src, fid) : NULL;
    if (!g) return 0;
    if (PyList_Append(g->parts, sent) < 0) return -1;
    if (pair && PyList_Append(g->blocks, pair) < 0) return -1;
    if (items && PyList_SetSlice(g->others, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, items) < 0) return -1;
    return gather_arrived(c, b, g, 1) < 0 ? -1 : 1;
}

/* receive.c: a REDUCE frame with a RET_BLOCK reply (index (src, first), the values as
 * arguments). 1 done; 0 for the Python path; -1 error. */
int gather_block_deliver(Core *c, uint32_t fid, uint64_t coll, const unsigned char *index, int nidx,
                         const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, uint8_t kind, Frames *frames) {
    if (!c->broadcasts || nidx != 2) return 0;
    int64_t at[2];
    memcpy(at, index, sizeof at);
    Gather *g = at[0] < 0 || at[0] > UINT32_MAX ? NULL : gather_find(c->broadcasts, coll, (uint32_t)at[0], fid);
    if (!g) return 0;
    PyObject *shape = Py_NewRef(g->shape); /* decoding may run Python code */
    PyObject *args = decode_args(c, kind, segs, lens, nseg);
    if (!args) { Py_DECREF(shape); return PyErr_Occurred() ? -1 : 0; }
    if (frames_restart(frames)) { Py_DECREF(args); Py_DECREF(shape); return -1; }
    if (coll != SYSTEM_ID) c->received++;
    PyObject *values = PySequence_List(args), *first = values ? PyLong_FromLongLong(at[1]) : NULL;
    PyObject *pair = first ? PyTuple_Pack(2, first, values) : NULL;
    Py_DECREF(args);
    Py_XDECREF(values);
    Py_XDECREF(first);
    /* the reply as Python would take it over: its items */
    PyObject *sent = pair ? PyList_New(0) : NULL;
    if (sent && add_items(c->broadcasts, sent, pair, shape) < 0) Py_CLEAR(sent);
    Py_DECREF(shape);
    if (!sent) { Py_XDECREF(pair); return -1; }
    int r = gather_reply(c, coll, (uint32_t)at[0], fid, pair, NULL, sent);
    Py_DECREF(sent);
    Py_DECREF(pair);
    return r < 0 ? -1 : 1; /* read and restarted: taken, even if the gather went meanwhile */
}

/* receive.c: a RET_GATHER reply's value (src, items) (borrowed). 1 done; 0 Python path; -1 error. */
int gather_items_deliver(Core *c, uint32_t fid, uint64_t coll, PyObject *value) {
    if (!c->broadcasts || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2 || !PyList_Check(PyTuple_GET_ITEM(value, 1)))
        return 0;
    unsigned long src = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(value, 0));
    if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
    PyObject *items = PyTuple_GET_ITEM(value, 1);
    return gather_reply(c, coll, (uint32_t)src, fid, NULL, items, items);
}

/* gather_offer(coll, fid, src, first, values) -> bool: a reply that came the Python way
 * (queued behind earlier messages of its source): a lone block's `values` from element
 * `first` on, or (first -1) a list of items; True if the core holds that gather and took it. */
PyObject *Core_gather_offer(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "gather_offer(coll, fid, src, first, values)");
        return NULL;
    }
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long fid = PyLong_AsUnsignedLong(args[1]), src = PyLong_AsUnsignedLong(args[2]);
    long first = PyLong_AsLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    Gather *g = c->broadcasts ? gather_find(c->broadcasts, coll, (uint32_t)src, (uint32_t)fid) : NULL;
    if (!g) Py_RETURN_FALSE;
    int r;
    if (first < 0) {
        if (!PyList_Check(args[4])) { PyErr_SetString(PyExc_TypeError, "gather_offer: items must be a list"); return NULL; }
        r = gather_reply(c, coll, (uint32_t)src, (uint32_t)fid, NULL, args[4], args[4]);
    } else {
        PyObject *values = PySequence_List(args[4]), *pair = values ? Py_BuildValue("(lO)", first, values) : NULL;
        PyObject *sent = pair ? PyList_New(0) : NULL;
        if (sent && add_items(c->broadcasts, sent, pair, g->shape) < 0) Py_CLEAR(sent);
        r = sent ? gather_reply(c, coll, (uint32_t)src, (uint32_t)fid, pair, NULL, sent) : -1;
        Py_XDECREF(sent);
        Py_XDECREF(pair);
        Py_XDECREF(values);
    }
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* A queued BROADCAST of this PE's own (Runtime.step's local loop). 1 done; 0 Python path; -1 error. */
int local_broadcast(Core *c, PyObject *header, PyObject *body) {
    if (!c->broadcasts || !PyBytes_Check(header) || PyBytes_GET_SIZE(header) != HSIZE || !PyList_Check(body)) return 0;
    const char *h = PyBytes_AS_STRING(header);
    if (((uint8_t)h[H_KIND] & KIND_MASK) != KIND_BROADCAST) return 0;
    Py_ssize_t nseg = PyList_GET_SIZE(body);
    if (nseg < 1 || nseg > MAX_ARGS + 1) return 0;
    Py_buffer views[MAX_ARGS + 1];
    const char *segs[MAX_ARGS + 1];
    Py_ssize_t lens[MAX_ARGS + 1], got = 0;
    int r = 0;
    for (; got < nseg; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(body, got), &views[got], PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear(); /* not a plain buffer: the Python path */
            break;
        }
        segs[got] = views[got].buf;
        lens[got] = views[got].len;
    }
    if (got == nseg) r = broadcast_deliver(c, h, HSIZE, segs, lens, nseg, NULL, body);
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return r;
}

/* use_broadcasts(manager, tree_from, balancer_holding, Block, PENDING, partials): broadcasts
 * compiled from now on (the slots they read are the contract's). */
PyObject *Core_use_broadcasts(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "use_broadcasts(manager, tree_from, holding, Block, PENDING, partials)");
        return NULL;
    }
    Broadcasts *b = PyMem_Calloc(1, sizeof(Broadcasts));
    if (!b) return PyErr_NoMemory();
    b->manager = Py_NewRef(args[0]);
    b->tree_from = Py_NewRef(args[1]);
    b->holding = Py_NewRef(args[2]);
    b->block_cls = Py_NewRef(args[3]);
    b->pending = Py_NewRef(args[4]);
    b->partials = Py_NewRef(args[5]);
    b->tree_root = -1;
    if (!PySet_Check(b->holding) || !PyDict_Check(b->partials)) {
        PyErr_SetString(PyExc_TypeError, "use_broadcasts: the balancer's holding must be a set, the manager's partials a dict");
        broadcasts_free(b);
        return NULL;
    }
    broadcasts_free(c->broadcasts);
    c->broadcasts = b;
    Py_RETURN_NONE;
}

/* gathers_forget(coll): drop the gathers of collection `coll` (it was destroyed). */
PyObject *Core_gathers_forget(Core *c, PyObject *coll_obj) {
    Broadcasts *b = c->broadcasts;
    unsigned long long coll = PyLong_AsUnsignedLongLong(coll_obj);
    if (PyErr_Occurred()) return NULL;
    for (Gather **p = b ? &b->list : NULL; p && *p;) {
        Gather *g = *p;
        if (g->coll == coll) { *p = g->next; gather_free(g); }
        else p = &g->next;
    }
    Py_RETURN_NONE;
}

/* gathers_under_way() -> [(coll, src, fid, got, expected)]: for reports and tests. */
PyObject *Core_gathers_under_way(Core *c, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (Gather *g = c->broadcasts ? c->broadcasts->list : NULL; out && g; g = g->next) {
        PyObject *item = Py_BuildValue("(KIInn)", (unsigned long long)g->coll, g->src, g->fid, g->got, g->expected);
        if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

