/* The butterfly all-reduce, compiled (reference: ReductionManager._exchange,
 * on_exchange, _advance and _wake in shoal/_runtime/reductions.py, and
 * Chare.allreduce's way there).
 *
 * An all-reduce of a whole collection with one element on every PE and a built-in
 * unordered reducer runs as log2(PEs) rounds of pairwise exchanges. Once a runtime has
 * a core, every such exchange lives here: an element's allreduce() starts it without
 * entering Python (its future made here, the value sent by send_to), a partner's value
 * is combined as its frame is delivered, and the last one resolves the future, which
 * resumes the awaiting coroutine at once (tasks.c). Values the common cases do not cover
 * (arrays of different shapes, user types, exact_sum) combine through the reducer's own
 * Python function; an all-reduce whose result other PEs' elements wait for too hands it
 * to the manager's _wake as well. */
#include "core.h"

#define LAST_ROUND 0xFFFF          /* butterfly.LAST: the result, to a PE outside the power of two */
#define ROUNDS 34                  /* rounds 0..32 and the last */
enum { STEP_RECV = 0, STEP_SEND = 1, STEP_SENDRECV = 2 }; /* butterfly.RECV, SEND, SENDRECV */

typedef struct {
    uint8_t what;
    uint16_t round;
    uint32_t peer;
} Step;

/* One PE's progress in one all-reduce (butterfly._Exchange). */
typedef struct Exchange {
    struct Exchange *next;
    uint64_t coll;
    uint32_t seq;
    int started, stage, sent;
    PyObject *value, *reducer, *fut; /* fut: the waiter resolved here, or NULL */
    PyObject *early[ROUNDS];         /* a partner's value per round, until this PE gets there */
} Exchange;

struct Exchanges {
    PyObject *manager;                   /* the ReductionManager (its _wake) */
    PyObject *waiters, *remote_waiters;  /* its dicts: others waiting in Python */
    PyObject *post_value;                /* rt.post_value: what send_to does not send */
    PyObject *result_cls;                /* reductions._ResultFuture */
    PyObject *context;                   /* the context module's namespace (_current) */
    PyObject *builtin[R_BUILTINS];       /* reducers.sum, product, max, min, logical_and, logical_or, nop, exact_sum, gather */
    PyObject *ufunc[4];                  /* np.add, multiply, maximum, minimum: fetched at the first array */
    PyObject *pe, *what;                 /* this PE as an int; "an allreduce of" */
    PyObject *chare_cls;                 /* Chare: an all-reduce's element must be one (its slots are read) */
    uint32_t npes;
    Step *steps;
    int nsteps;
    Exchange *list;
};


/* This PE's steps (butterfly.steps_of). */
static int make_steps(Exchanges *x, uint32_t pe) {
    uint32_t npes = x->npes, p2 = 1;
    while ((uint64_t)p2 * 2 <= npes) p2 *= 2;
    Step *s = PyMem_Calloc(2 + 32 + 1, sizeof(Step));
    if (!s) { PyErr_NoMemory(); return -1; }
    int n = 0;
    if (pe >= p2) {
        s[n++] = (Step){STEP_SEND, 0, pe - p2};
        s[n++] = (Step){STEP_RECV, LAST_ROUND, pe - p2};
    } else {
        if (pe < npes - p2) s[n++] = (Step){STEP_RECV, 0, pe + p2};
        uint16_t round = 1;
        for (uint32_t bit = 1; bit < p2; bit <<= 1, round++) s[n++] = (Step){STEP_SENDRECV, round, pe ^ bit};
        if (pe < npes - p2) s[n++] = (Step){STEP_SEND, LAST_ROUND, pe + p2};
    }
    x->steps = s;
    x->nsteps = n;
    return 0;
}

static int round_slot(uint32_t round) { return round == LAST_ROUND ? ROUNDS - 1 : round < ROUNDS - 1 ? (int)round : -1; }

static void exchange_free(Exchange *e) {
    Py_XDECREF(e->value);
    Py_XDECREF(e->reducer);
    Py_XDECREF(e->fut);
    for (int i = 0; i < ROUNDS; i++) Py_XDECREF(e->early[i]);
    PyMem_Free(e);
}

/* The exchange of all-reduce `seq` of collection `coll` (made if new; NULL: no memory). */
static Exchange *exchange_of(Exchanges *x, uint64_t coll, uint32_t seq) {
    for (Exchange *e = x->list; e; e = e->next)
        if (e->coll == coll && e->seq == seq) return e;
    Exchange *e = PyMem_Calloc(1, sizeof(Exchange));
    if (!e) { PyErr_NoMemory(); return NULL; }
    e->coll = coll;
    e->seq = seq;
    e->next = x->list;
    x->list = e;
    return e;
}

static void exchange_unlink(Exchanges *x, Exchange *gone) {
    for (Exchange **p = &x->list; *p; p = &(*p)->next)
        if (*p == gone) { *p = gone->next; return; }
}

/* NumPy's add, multiply, maximum and minimum, taken from NumPy the first time two arrays
 * combine (NumPy is then imported: the arrays are its). 0 or -1. */
static int fetch_ufuncs(Exchanges *x) {
    static const char *names[4] = {"add", "multiply", "maximum", "minimum"};
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (!numpy) return -1;
    for (int i = 0; i < 4; i++) /* (after a failed fetch, the ones still missing) */
        if (!x->ufunc[i] && !(x->ufunc[i] = PyObject_GetAttrString(numpy, names[i]))) { Py_DECREF(numpy); return -1; }
    Py_DECREF(numpy);
    return 0;
}

PyObject *exchange_reducer(Exchanges *x, int rid) { return x && rid >= 0 && rid < R_BUILTINS ? x->builtin[rid] : NULL; }

int builtin_reducer(Exchanges *x, PyObject *reducer) {
    if (!x) return -1;
    for (int i = 0; i < R_BUILTINS; i++)
        if (reducer == x->builtin[i]) return i;
    return -1;
}

#define COMBINE_LOOP(T, U) do { \
        const T *x_ = (const T *)PyArray_DATA(a), *y_ = (const T *)PyArray_DATA(b); \
        T *z_ = (T *)PyArray_DATA((PyArrayObject *)out); \
        if (k == R_SUM) for (npy_intp i_ = 0; i_ < n; i_++) z_[i_] = (T)((U)x_[i_] + (U)y_[i_]); \
        else for (npy_intp i_ = 0; i_ < n; i_++) z_[i_] = (T)((U)x_[i_] * (U)y_[i_]); \
    } while (0)

/* The sum or product of two arrays of one shape (at least one dimension) and one
 * numeric dtype, C-contiguous, aligned and in native byte order, computed as NumPy's
 * add and multiply do (integers wrap; floats are IEEE operations of their own width)
 * but without a ufunc call, which is most of a small all-reduce's combining (167 ns
 * for two 2-element arrays here). 1: *result set (NULL with an error); 0: not such arrays. */
static int combine_plain(int k, PyArrayObject *a, PyArrayObject *b, PyObject **result) {
    if ((k != R_SUM && k != R_PRODUCT) || PyArray_TYPE(a) != PyArray_TYPE(b) ||
        !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_IS_C_CONTIGUOUS(b) || !PyArray_ISALIGNED(a) ||
        !PyArray_ISALIGNED(b) || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISNOTSWAPPED(b))
        return 0;
    int type = PyArray_TYPE(a);
    if (type != NPY_FLOAT64 && type != NPY_FLOAT32 && type != NPY_INT64 && type != NPY_INT32 &&
        type != NPY_UINT64 && type != NPY_UINT32)
        return 0;
    PyArray_Descr *d = PyArray_DESCR(a);
    Py_INCREF(d);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, d, PyArray_NDIM(a), PyArray_DIMS(a), NULL, NULL, 0, NULL);
    *result = out;
    if (!out) return 1;
    npy_intp n = PyArray_SIZE(a);
    switch (type) {
    case NPY_FLOAT64: COMBINE_LOOP(double, double); break;
    case NPY_FLOAT32: COMBINE_LOOP(float, float); break;
    case NPY_INT64: COMBINE_LOOP(int64_t, uint64_t); break;
    case NPY_UINT64: COMBINE_LOOP(uint64_t, uint64_t); break;
    case NPY_INT32: COMBINE_LOOP(int32_t, uint32_t); break;
    default: COMBINE_LOOP(uint32_t, uint32_t); break;
    }
    return 1;
}

/* `lo` and `hi` combined (the lower PE's value first), as reducer.combine([lo, hi]) does:
 * the built-ins' common cases here (reducers._fold), anything else by the reducer. */
PyObject *combine_two(Exchanges *x, PyObject *reducer, PyObject *lo, PyObject *hi) {
    int k = builtin_reducer(x, reducer);
    if (k == R_NOP) Py_RETURN_NONE;
    if (k >= 0 && k <= R_OR) {
        int alo = is_array(lo), ahi = is_array(hi);
        /* (0-d arrays take the reducer's own way: a ufunc would make them a scalar) */
        if (k <= R_MIN && alo && ahi && is_exact_array(lo) && is_exact_array(hi) &&
            PyArray_NDIM((PyArrayObject *)lo) > 0) {
            PyArrayObject *a = (PyArrayObject *)lo, *b = (PyArrayObject *)hi;
            if (PyArray_SAMESHAPE(a, b) && PyArray_EquivTypes(PyArray_DESCR(a), PyArray_DESCR(b))) {
                PyObject *plain;
                if (combine_plain(k, a, b, &plain)) return plain;
                if (!x->ufunc[3] && fetch_ufuncs(x) < 0) return NULL;
                return PyObject_CallFunctionObjArgs(x->ufunc[k], lo, hi, NULL); /* a fresh array of that dtype */
            }
        } else if (!alo && !ahi) { /* functools.reduce(op, [lo, hi]) = op(lo, hi) */
            int r;
            switch (k) {
            case R_SUM: return PyNumber_Add(lo, hi);
            case R_PRODUCT: return PyNumber_Multiply(lo, hi);
            case R_MAX: /* max(lo, hi): hi only if it is greater */
            case R_MIN:
                r = PyObject_RichCompareBool(hi, lo, k == R_MAX ? Py_GT : Py_LT);
                return r < 0 ? NULL : Py_NewRef(r ? hi : lo);
            default: /* bool(lo) and bool(hi); bool(lo) or bool(hi) */
                r = PyObject_IsTrue(lo);
                if (r < 0) return NULL;
                if (r == (k == R_OR)) return PyBool_FromLong(r);
                r = PyObject_IsTrue(hi);
                return r < 0 ? NULL : PyBool_FromLong(r);
            }
        }
    }
    PyObject *fn = PyObject_GetAttr(reducer, shoal_names.combine);
    PyObject *pair = fn ? PyList_New(2) : NULL;
    if (!pair) { Py_XDECREF(fn); return NULL; }
    PyList_SET_ITEM(pair, 0, Py_NewRef(lo));
    PyList_SET_ITEM(pair, 1, Py_NewRef(hi));
    PyObject *r = PyObject_CallOneArg(fn, pair);
    Py_DECREF(fn);
    Py_DECREF(pair);
    return r;
}

/* Resolve `fut` (pending, of no PE elsewhere) with `value`: Future._resolve. */
static int resolve(Core *c, PyObject *fut, PyObject *value) {
    int pending = future_pending(c, fut);
    if (pending <= 0) { /* the Python method says what is wrong */
        PyObject *r = pending < 0 ? NULL : PyObject_CallMethodOneArg(fut, shoal_names.resolve, value);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    Py_XSETREF(SLOT(fut, shoal_slots.future_value), Py_NewRef(value));
    future_set_done(c, fut);
    PyObject *callbacks = SLOT(fut, shoal_slots.future_callbacks);
    if (!callbacks || callbacks == Py_None) return 0;
    SLOT(fut, shoal_slots.future_callbacks) = Py_NewRef(Py_None); /* the list's reference is now ours */
    int err = 0;
    for (Py_ssize_t i = 0; !err && PyList_Check(callbacks) && i < PyList_GET_SIZE(callbacks); i++) {
        PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(callbacks, i), fut);
        if (r) Py_DECREF(r); else err = -1;
    }
    Py_DECREF(callbacks);
    return err;
}

/* The all-reduce is complete here with `value` (a new reference, stolen): finish it, and
 * hand it to whoever waits (the manager's _wake for waiters it keeps, then `fut`). */
static int complete(Core *c, Exchanges *x, uint64_t coll, uint32_t seq, PyObject *reducer, PyObject *value, PyObject *fut) {
    int k = builtin_reducer(x, reducer);
    if (k < 0 || k == R_EXACT) {
        PyObject *finish = PyObject_GetAttr(reducer, shoal_names.finish);
        if (!finish) { Py_DECREF(value); return -1; }
        if (finish != Py_None) Py_SETREF(value, PyObject_CallOneArg(finish, value));
        Py_DECREF(finish);
        if (!value) return -1;
    }
    int err = 0;
    if (PyDict_GET_SIZE(x->waiters) || PyDict_GET_SIZE(x->remote_waiters)) {
        PyObject *key = Py_BuildValue("((K)I)", (unsigned long long)coll, (unsigned)seq);
        PyObject *r = key ? PyObject_CallMethodObjArgs(x->manager, shoal_names.wake, key, value, NULL) : NULL;
        Py_XDECREF(key);
        if (r) Py_DECREF(r); else err = -1;
    }
    if (!err && fut) err = resolve(c, fut, value);
    Py_DECREF(value);
    return err;
}

/* Send `value` to `peer` for `round` of all-reduce (coll, seq). */
static int send_round(Core *c, Exchanges *x, uint64_t coll, uint32_t seq, PyObject *value, uint32_t peer, uint16_t round) {
    int sent = send_to(c, (long)peer, KIND_EXCHANGE, round, seq, coll, NULL, 0, &value, 1);
    if (sent) return sent < 0 ? -1 : 0;
    PyObject *r = PyObject_CallFunction(x->post_value, "IiHIKO", peer, KIND_EXCHANGE, round, seq,
                                        (unsigned long long)coll, value);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Whether `e` is still under way (Python code run meanwhile, a value's pickling or a
 * reducer's function, may have destroyed the collection and with it the exchange). */
static int alive(Exchanges *x, Exchange *e) {
    for (Exchange *f = x->list; f; f = f->next)
        if (f == e) return 1;
    return 0;
}

/* Take the exchange as far as the values here allow (_advance); done: it is removed. */
static int advance(Core *c, Exchanges *x, Exchange *e) {
    while (e->stage < x->nsteps) {
        Step s = x->steps[e->stage];
        if (s.what != STEP_RECV && !e->sent) {
            PyObject *held = Py_NewRef(e->value); /* the send may run Python code (see alive) */
            int sent = send_round(c, x, e->coll, e->seq, held, s.peer, s.round);
            Py_DECREF(held);
            if (sent < 0) return -1;
            if (!alive(x, e)) return 0;
            e->sent = 1;
            if (s.what == STEP_SEND) {
                e->stage++;
                e->sent = 0;
                continue;
            }
        }
        int slot = round_slot(s.round);
        if (slot < 0) {
            PyErr_Format(PyExc_SystemError, "PE %u: an all-reduce step of round %u", c->pe, (unsigned)s.round);
            return -1;
        }
        PyObject *w = e->early[slot];
        if (!w) return 0; /* the partner's value has not come yet */
        e->early[slot] = NULL;
        if (s.round == LAST_ROUND) {
            Py_SETREF(e->value, w);
        } else {
            PyObject *mine = Py_NewRef(e->value), *reducer = Py_NewRef(e->reducer);
            PyObject *v = c->pe < s.peer ? combine_two(x, reducer, mine, w) : combine_two(x, reducer, w, mine);
            Py_DECREF(mine);
            Py_DECREF(reducer);
            Py_DECREF(w);
            if (!v) return -1;
            if (!alive(x, e)) { Py_DECREF(v); return 0; }
            Py_SETREF(e->value, v);
        }
        e->stage++;
        e->sent = 0;
    }
    exchange_unlink(x, e);
    PyObject *value = e->value, *reducer = Py_NewRef(e->reducer), *fut = e->fut;
    uint64_t coll = e->coll;
    uint32_t seq = e->seq;
    e->value = e->fut = NULL;
    exchange_free(e);
    int r = complete(c, x, coll, seq, reducer, value, fut);
    Py_DECREF(reducer);
    Py_XDECREF(fut);
    return r;
}

/* This PE's partial `value` starts all-reduce (coll, seq); `fut` (may be NULL) gets the result. */
static int start(Core *c, Exchanges *x, uint64_t coll, uint32_t seq, PyObject *value, PyObject *reducer, PyObject *fut) {
    if (!x->steps && make_steps(x, c->pe) < 0) return -1;
    Exchange *e = exchange_of(x, coll, seq);
    if (!e) return -1;
    if (e->started) {
        PyErr_Format(PyExc_RuntimeError, "PE %u: all-reduce %u of collection %#llx started twice", c->pe, seq,
                     (unsigned long long)coll);
        return -1;
    }
    e->started = 1;
    e->value = Py_NewRef(value);
    e->reducer = Py_NewRef(reducer);
    e->fut = Py_XNewRef(fut);
    return advance(c, x, e);
}

/* A partner's `value` (a new reference, stolen) for `round` of all-reduce (coll, seq). */
static int arrive(Core *c, Exchanges *x, uint64_t coll, uint32_t seq, uint32_t round, PyObject *value) {
    int slot = round_slot(round);
    Exchange *e = slot < 0 ? NULL : exchange_of(x, coll, seq);
    if (!e) {
        if (slot < 0) PyErr_Format(PyExc_ValueError, "PE %u: an all-reduce message of round %u", c->pe, round);
        Py_DECREF(value);
        return -1;
    }
    if (e->early[slot]) {
        PyErr_Format(PyExc_RuntimeError, "PE %u: two values for round %u of all-reduce %u of collection %#llx",
                     c->pe, round, seq, (unsigned long long)coll);
        Py_DECREF(value);
        return -1;
    }
    e->early[slot] = value;
    return e->started ? advance(c, x, e) : 0;
}

/* receive.c: an EXCHANGE frame's value (borrowed). 1 done, -1 error; 0: no compiled exchanges. */
int exchange_deliver(Core *c, uint16_t round, uint32_t seq, uint64_t coll, PyObject *value) {
    Exchanges *x = c->exchanges;
    if (!x) return 0;
    return arrive(c, x, coll, seq, round, Py_NewRef(value)) < 0 ? -1 : 1;
}

void exchanges_free(Exchanges *x) {
    if (!x) return;
    while (x->list) {
        Exchange *e = x->list;
        x->list = e->next;
        exchange_free(e);
    }
    PyObject **refs[] = {&x->manager, &x->waiters, &x->remote_waiters, &x->post_value, &x->result_cls, &x->context,
                         &x->pe, &x->what, &x->chare_cls};
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) Py_CLEAR(*refs[i]);
    for (int i = 0; i < R_BUILTINS; i++) Py_CLEAR(x->builtin[i]);
    for (int i = 0; i < 4; i++) Py_CLEAR(x->ufunc[i]);
    PyMem_Free(x->steps);
    PyMem_Free(x);
}

/* -- the methods the Python runtime calls -------------------------------------------- */

/* use_exchanges(manager, npes, post_value, ResultFuture, Chare, context_ns,
 * (sum, product, max, min, logical_and, logical_or, nop, exact_sum)) */
PyObject *Core_use_exchanges(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) != R_BUILTINS) {
        PyErr_SetString(PyExc_TypeError, "use_exchanges(manager, npes, post_value, ResultFuture, Chare, context, reducers[8])");
        return NULL;
    }
    long npes = PyLong_AsLong(args[1]);
    if (npes < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "use_exchanges: npes must be at least 1");
        return NULL;
    }
    Exchanges *x = PyMem_Calloc(1, sizeof(Exchanges));
    if (!x) return PyErr_NoMemory();
    x->npes = (uint32_t)npes;
    x->manager = Py_NewRef(args[0]);
    x->post_value = Py_NewRef(args[2]);
    x->result_cls = Py_NewRef(args[3]);
    x->chare_cls = Py_NewRef(args[4]);
    x->context = Py_NewRef(args[5]);
    for (int i = 0; i < R_BUILTINS; i++) x->builtin[i] = Py_NewRef(PyTuple_GET_ITEM(args[6], i));
    x->waiters = PyObject_GetAttr(x->manager, shoal_names.waiters);
    x->remote_waiters = PyObject_GetAttr(x->manager, shoal_names.remote_waiters);
    x->pe = PyLong_FromUnsignedLong(c->pe);
    x->what = PyUnicode_FromString("an allreduce of");
    if (!x->waiters || !x->remote_waiters || !x->pe || !x->what || !PyDict_Check(x->waiters) ||
        !PyDict_Check(x->remote_waiters) || !PyDict_Check(x->context) || !PyType_Check(args[3]) ||
        !PyType_Check(args[4])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "use_exchanges: unexpected manager, classes or context");
        exchanges_free(x);
        return NULL;
    }
    exchanges_free(c->exchanges);
    c->exchanges = x;
    Py_RETURN_NONE;
}

/* exchange(coll, seq, value, reducer, fut): this PE's partial value starts an all-reduce
 * (ReductionManager._exchange); `fut` (or None) gets the result. */
PyObject *Core_exchange(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    Exchanges *x = c->exchanges;
    if (!x || nargs != 5) {
        PyErr_SetString(PyExc_TypeError, x ? "exchange(coll, seq, value, reducer, fut)" : "use_exchanges() first");
        return NULL;
    }
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long seq = PyLong_AsUnsignedLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (start(c, x, coll, (uint32_t)seq, args[2], args[3], args[4] == Py_None ? NULL : args[4]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* exchange_arrive(coll, seq, round, value): a partner's value that came the Python way. */
PyObject *Core_exchange_arrive(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    Exchanges *x = c->exchanges;
    if (!x || nargs != 4) {
        PyErr_SetString(PyExc_TypeError, x ? "exchange_arrive(coll, seq, round, value)" : "use_exchanges() first");
        return NULL;
    }
    unsigned long long coll = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long seq = PyLong_AsUnsignedLong(args[1]), round = PyLong_AsUnsignedLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (arrive(c, x, coll, (uint32_t)seq, (uint32_t)round, Py_NewRef(args[3])) < 0) return NULL;
    Py_RETURN_NONE;
}

/* exchange_forget(coll): drop the all-reduces of collection `coll` (it was destroyed). */
PyObject *Core_exchange_forget(Core *c, PyObject *coll_obj) {
    Exchanges *x = c->exchanges;
    unsigned long long coll = PyLong_AsUnsignedLongLong(coll_obj);
    if (PyErr_Occurred()) return NULL;
    for (Exchange **p = x ? &x->list : NULL; p && *p;) {
        Exchange *e = *p;
        if (e->coll == coll) { *p = e->next; exchange_free(e); }
        else p = &e->next;
    }
    Py_RETURN_NONE;
}

/* exchanges_under_way() -> [(coll, seq, started, stage)]: for reports and tests. */
PyObject *Core_exchanges_under_way(Core *c, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (Exchange *e = c->exchanges ? c->exchanges->list : NULL; out && e; e = e->next) {
        PyObject *item = Py_BuildValue("(KIii)", (unsigned long long)e->coll, (unsigned)e->seq, e->started, e->stage);
        if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

/* The pending future of an all-reduce of `el` (Future.local: no id, a description). */
static PyObject *new_future(Core *c, Exchanges *x, PyObject *el) {
    PyTypeObject *cls = (PyTypeObject *)x->result_cls;
    PyObject *fut = cls->tp_alloc(cls, 0), *origin = fut ? PyTuple_Pack(2, x->what, el) : NULL;
    if (!origin) { Py_XDECREF(fut); return NULL; }
    SLOT(fut, shoal_slots.future_rt) = Py_NewRef(c->rt);
    SLOT(fut, shoal_slots.future_owner) = Py_NewRef(x->pe);
    SLOT(fut, shoal_slots.future_fid) = PyLong_FromLong(0);
    future_set_pending(c, fut);
    SLOT(fut, shoal_slots.future_value) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_callbacks) = Py_NewRef(Py_None);
    SLOT(fut, shoal_slots.future_origin) = origin;
    return fut;
}

/* allreduce(el, value, reducer) -> the future of the result, or None when this is not a
 * case for the compiled exchange (Chare.allreduce then takes the Python path): the
 * element is on its home PE, alone there in a complete collection that has an element
 * on every PE, and the reducer is a built-in one (None: sum). */
PyObject *Core_allreduce(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    Exchanges *x = c->exchanges;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "allreduce(el, value, reducer)");
        return NULL;
    }
    PyObject *el = args[0], *value = args[1], *reducer = args[2] == Py_None && x ? x->builtin[R_SUM] : args[2];
    int rid = builtin_reducer(x, reducer);
    if (!x || active != c || rid < 0 || rid == R_GATHER || !PyObject_TypeCheck(el, (PyTypeObject *)x->chare_cls))
        Py_RETURN_NONE;
    PyObject *now = PyDict_GetItemWithError(x->context, shoal_names.current);
    if (now != c->rt) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *away = PyObject_GetAttr(el, shoal_names.shoal_away);
    if (!away) return NULL;
    Py_DECREF(away);
    PyObject *proxy = SLOT(el, shoal_slots.chare_collection), *info = proxy ? SLOT(proxy, shoal_slots.proxy_info) : NULL;
    PyObject *id = info ? SLOT(info, shoal_slots.info_id) : NULL;
    if (away != Py_False || !id) Py_RETURN_NONE;
    PyObject *cs = PyDict_GetItemWithError(c->colls, id);
    if (!cs) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *done = SLOT(cs, shoal_slots.state_done), *count = SLOT(cs, shoal_slots.state_count), *hosts = SLOT(cs, shoal_slots.state_hosts);
    if (done != Py_True || !count || !PyLong_CheckExact(count) || PyLong_AsLong(count) != 1 || !hosts) Py_RETURN_NONE;
    Py_ssize_t nhosts = PyObject_Length(hosts);
    if (nhosts < 0) return NULL;
    if ((uint64_t)nhosts != x->npes) Py_RETURN_NONE;
    unsigned long long coll = PyLong_AsUnsignedLongLong(id);
    if (PyErr_Occurred()) return NULL;
    long seq = element_seq(el); /* the element's next contribution number: el._shoal_seq += 1 */
    if ((seq < 0 && PyErr_Occurred()) || set_element_seq(el, seq + 1) < 0) return NULL;
    PyObject *fut = new_future(c, x, el);
    if (!fut) return NULL;
    if (start(c, x, coll, (uint32_t)seq, value, reducer, fut) < 0) { Py_DECREF(fut); return NULL; }
    return fut;
}

