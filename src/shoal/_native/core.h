/* The compiled core's private declarations, shared by core.c, send.c and receive.c. */
#ifndef SHOAL_CORE_H
#define SHOAL_CORE_H

#include "native.h"
#include "contract.h"
#include <structmember.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shoal_ARRAY_API
#ifndef SHOAL_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

/* NumPy's C API is loaded at the first array test after this process imported NumPy, not
 * at start-up: a program without arrays never pays NumPy's import, and no object is an
 * array before NumPy is imported, so until then these tests say no and load nothing
 * (shoal/numpy_types.py does the same for the Python side). */
int numpy_api_load(void);
static inline int numpy_api_ready(void) { return PyArray_API != NULL || numpy_api_load(); }
static inline int is_array(PyObject *o) { return numpy_api_ready() && PyArray_Check(o); }
static inline int is_exact_array(PyObject *o) { return numpy_api_ready() && PyArray_CheckExact(o); }

/* The wire format, as _runtime/message.py, _runtime/system.py and _runtime/channels.py
 * define it; tests/transport/test_wire_format.py fails, naming the constant, when one of these
 * disagrees with the Python definition. */
/* the header (message.HEADER, <BBHIIQ): kind, index rank, entry, source, aux, collection,
 * at these byte offsets; then the index as `rank` int64s (message.INDEX_STRUCTS) */
#define HSIZE 20
#define H_KIND 0
#define H_RANK 1
#define H_ENTRY 2
#define H_SRC 4
#define H_AUX 8
#define H_COLL 12
#define MAX_INDEX 8
#define MAX_ARGS 16
#define KIND_ARRAYS 0x40 /* message.ARRAYS */
#define KIND_KWARGS 0x80 /* message.KWARGS */
#define KIND_MASK 0x1F   /* message.KIND_MASK */
#define KIND_FWD 0x20    /* message.FWD: forwarded by a PE the element left (the Python path keeps order) */
#define SYSTEM_ID 0      /* system.SYSTEM_ID */
#define NO_COLL 1        /* system.NO_COLL: the collection field of messages of no collection (futures) */
#define KIND_INVOKE 0    /* message.Kind.INVOKE, and so on */
#define KIND_BROADCAST 1
#define KIND_FUTURE 3
#define KIND_REDUCE 4
#define KIND_RESULT 5
#define KIND_CHANNEL 8
#define KIND_EXCHANGE 10
#define SEQ_MASK 0xFFFF  /* channel sequence numbers wrap at 2**16 (they travel in the entry field) */

typedef struct Core Core;
typedef struct Exchanges Exchanges;
typedef struct Broadcasts Broadcasts;
typedef struct Contributions Contributions;
typedef struct TraceRuns TraceRuns;
extern PyTypeObject CoreType;

/* A received eager frame for the runtime: 1 delivered; 0 not a case the compiled path
 * handles (deliver it through Python); -1 error set. The receive is restarted once the
 * buffer has been read, before any Python code runs. The frames' hook (core.c). */
int core_deliver(Core *core, const char *frame, Py_ssize_t n, Frames *frames);

/* An entry-method call (positional arguments) to one element. 1: sent; 0: not handled
 * (use the Python path, nothing was done); -1: error set. */
int core_send_call(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs);
/* An element's ret=True call: 1 sent, *out its future; 0 the Python path; -1 error. */
int core_send_ret(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, PyObject **out);
int core_send(Core *core, PyObject *proxy, uint8_t kind, uint16_t entry, uint32_t aux, PyObject *const *args, Py_ssize_t nargs);
/* The same with keyword arguments `kwargs` (a dict); 0 for a local element (Python path). */
int core_send_kw(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs);
/* A broadcast of entry method `entry` to the collection of `proxy` whose arguments
 * pickle_simple takes (Runtime.broadcast's first case): sent to the collection's root,
 * to this PE's local queue if it is the root. `*out` is the call's future if `ret`,
 * else None. 1 sent; 0 not handled (nothing done: the Python path); -1 error set. */
int core_broadcast(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, int ret, PyObject **out);
/* Core.new_future(back): a registered pending Future made `back` frames above the
 * current Python frame (a new reference; NULL with an error). */
PyObject *core_new_future(Core *core, long back);

/* The compiled core serving runtime `rt`, or NULL (borrowed). */
Core *core_for(PyObject *rt);

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
    PyObject *slow_send;   /* transport.send_after_eager(dest, header, segments): what one eager frame cannot hold */
    PyObject *local_append; /* rt.local.append: messages to elements of this PE */
    PyObject *local_popleft; /* rt.local.popleft */
    PyObject *local;         /* rt.local */
    PyObject *on_value;      /* rt._on_value(kind, entry, src, aux, coll, value): reduction messages */
    PyObject *route;         /* rt.locations.route(proxy) -> PE, caching it on the proxy */
    PyObject *send_future;   /* rt.send_future(owner, fid, value) */
    PyObject *replier;       /* rt._replier(owner, fid) -> the reply callable of a ret=True call */
    PyObject *trace;         /* the tracer's trace_runs(list), or NULL: tracing off (trace.c) */
    TraceRuns *trace_runs;   /* the runs of entry methods kept for it (trace.c), or NULL */
    PyObject *comm;          /* comm(el, proxy, nbytes): one in COMM_SAMPLE sends from an element, or NULL */
    PyObject *current;       /* the element whose entry method runs now (borrowed), or NULL */
    long comm_countdown;     /* sends until the next one sampled */
    uint64_t rng;            /* xorshift state: sampling intervals vary, so no send pattern aliases with them */
    PyObject *set_cls;                                               /* receive_sets.ReceiveSet */
    PyObject *future_cls, *table, *futures;       /* futures.Future, rt.future_table, its futures */
    PyObject *fut_pending, *fut_done; /* futures._PENDING and _DONE, given to Core() */
    Exchanges *exchanges;    /* the compiled all-reduces (exchange.c), once use_exchanges() was called */
    Broadcasts *broadcasts;  /* the compiled broadcasts (broadcasts.c), once use_broadcasts() was called */
    Contributions *contributions; /* the compiled contributions (contribute.c), once use_contributions() was called */
    PyObject *ready;         /* rt.ready: what the engine runs next (a woken coroutine's resume) */
    uint32_t pe;
    long long sent, received, depth, calls;
    double busy;             /* ticks in outermost entry methods: the PE's busy time (background load) */
};

extern Core *active; /* the core of the runtime in this process (one MPI PE per process) */
extern PyTypeObject CompiledType;

/* slot `off` (a __slots__ member's offset) of `obj`, borrowed; NULL if unset */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* (now_ticks, the core's clock: native.h) */

/* Whether element `el` holds messages back until a sender's fence comes (migration.py):
 * then every message for it takes the Python path, which keeps the order. */
static inline int holding(Core *c, PyObject *el) {
    PyObject *held = SLOT(el, shoal_slots.chare_held);
    return held != NULL && held != Py_None;
}

/* Messages between elements are sampled, one in COMM_SAMPLE on average, for the
 * communication graph of load balancing (balancing.record_comm scales counts back up). */
#define COMM_SAMPLE 64

/* The next sampling interval: uniform in 1 .. 2*COMM_SAMPLE-1 (mean COMM_SAMPLE). */
static inline long comm_interval(Core *c) {
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return 1 + (long)(x % (2 * COMM_SAMPLE - 1));
}

/* The bytes of `args` as sent: plain arrays' data, 64 for anything else (an estimate). */
static inline Py_ssize_t args_nbytes(PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) n += is_array(args[i]) ? PyArray_NBYTES((PyArrayObject *)args[i]) : 64;
    return n;
}

/* Sample a send of `args` from the running element to the element of `proxy`. */
static inline int sample_comm(Core *c, PyObject *proxy, PyObject *const *args, Py_ssize_t nargs) {
    if (--c->comm_countdown > 0) return 0;
    c->comm_countdown = comm_interval(c);
    if (!c->comm || !c->current) return 0;
    PyObject *r = PyObject_CallFunction(c->comm, "OOn", c->current, proxy, args_nbytes(args, nargs));
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Add `ticks` to element `el`'s load (slot 1 of its float64[2] counters; slot 0 holds
 * the seconds the Python paths measured). */
/* An element's load counters (Chare._shoal_load): two doubles, seconds timed by the
 * Python paths and clock ticks timed by the compiled ones; 32 bytes, not an ndarray's 128. */
typedef struct {
    PyObject_HEAD
    double v[2];
} Load;
extern PyTypeObject LoadType;

static inline void add_load(Core *c, PyObject *el, uint64_t ticks) {
    PyObject *load = SLOT(el, shoal_slots.chare_load);
    if (load && Py_IS_TYPE(load, &LoadType)) ((Load *)load)->v[1] += (double)ticks;
}

/* Element `el`'s count of contributions to its collection's reductions (Chare._shoal_seq,
 * a slot; unset, as in an element made outside a collection: 0), or -1 with an error. */
static inline long element_seq(PyObject *el) {
    PyObject *seq = SLOT(el, shoal_slots.chare_seq);
    return seq ? PyLong_AsLong(seq) : 0;
}
/* Set it to `seq`. 0, or -1 with an error. */
static inline int set_element_seq(PyObject *el, long seq) {
    PyObject *obj = PyLong_FromLong(seq);
    if (!obj) return -1;
    Py_XSETREF(SLOT(el, shoal_slots.chare_seq), obj);
    return 0;
}
/* Whether future `fut` is still pending: 1 yes, 0 no (or its state is unset), -1 error. */
static inline int future_pending(Core *c, PyObject *fut) {
    PyObject *state = SLOT(fut, shoal_slots.future_state);
    if (state == c->fut_pending) return 1;
    return state ? PyObject_RichCompareBool(state, c->fut_pending, Py_EQ) : 0;
}

/* Mark a future just allocated (its state unset) pending: Future.__init__'s state. */
static inline void future_set_pending(Core *c, PyObject *fut) {
    Py_XSETREF(SLOT(fut, shoal_slots.future_state), Py_NewRef(c->fut_pending));
}

/* Mark future `fut` done (its value is set apart): Future._resolve's state change. */
static inline void future_set_done(Core *c, PyObject *fut) {
    Py_XSETREF(SLOT(fut, shoal_slots.future_state), Py_NewRef(c->fut_done));
}

/* Whether `key`, a keyword of a call (an item of its kwnames), is `name`. */
static inline int keyword_is(PyObject *key, const char *name) {
    return PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, name) == 0;
}

/* Whether collection id `coll` (an int) is the system group's, whose messages are not
 * counted; an id that is not a C long is not (as `coll != SYSTEM_ID` in Python). */
static inline int is_system(PyObject *coll) {
    long v = PyLong_AsLong(coll);
    if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return v == SYSTEM_ID;
}

/* core.c: a method of a runtime object (a channel's send, a receive set's post) with a
 * compiled path. fast(core, obj, args, nargs) runs first when the call has no keywords
 * and the core is serving: 1 done (the call returns None), 0 not handled, -1 error.
 * Otherwise the call is fallback(obj, *args, **kwargs), the Python method. */
typedef int (*fastfunc)(Core *c, PyObject *obj, PyObject *const *args, Py_ssize_t nargs);
PyObject *compiled_method(Core *c, PyObject *obj, PyObject *fallback, fastfunc fast);
/* The same for a method that returns a value: fast(core, obj, extra, args, nargs, kwnames)
 * runs first, keywords and all, while the core is serving: a new reference, the call's
 * value; NULL with an error; NULL without one: not handled (fallback takes the call). */
typedef PyObject *(*valuefunc)(Core *c, PyObject *obj, PyObject *extra, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *compiled_value_method(Core *c, PyObject *obj, PyObject *fallback, valuefunc fast, PyObject *extra);
/* The offset of slot `name` of class `cls` (a __slots__ member descriptor), or -1 (error set). */
/* tasks.c: a coroutine task's compiled resume() and wake_now(fut) */
PyObject *Core_task_resume(Core *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_task_wake_now(Core *self, PyObject *const *args, Py_ssize_t nargs);

/* send.c */
/* dtype.str of `d` (byte order, kind, item size in decimal) at `code` (room for 24): its length */
int dtype_code(char *code, PyArray_Descr *d, long long itemsize);
char *describe(char *p, char *end, PyArrayObject *a);
int plain_array(PyObject *o);
int fill_array(PyArrayObject *a, const char *data);
PyObject *copy_plain(PyArrayObject *a);
int send_segments(Core *c, long dest, const char *header, Py_ssize_t hlen, PyObject *segments);
int send_to(Core *c, long dest, uint8_t kind, uint16_t entry, uint32_t aux, unsigned long long coll,
            const char *packed, Py_ssize_t plen, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_describe(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_send_value(Core *c, PyObject *const *args, Py_ssize_t nargs);

/* simple_pickle.c: the pickle of simple arguments, written and read without Python */
#define SIMPLE_PICKLE_MAX 1024 /* the room pickle_simple may write */
/* The tuple of `nargs` values at `args` pickled into `out` (SIMPLE_PICKLE_MAX bytes):
 * its length, or 0 if a value is not simple (None, bool, float, 64-bit int, short str,
 * pending future, tuple of them). */
Py_ssize_t pickle_simple(char *out, PyObject *const *args, Py_ssize_t nargs);
/* The tuple pickle_simple pickled into the `n` bytes at `s` (a new reference), or NULL:
 * with no error set when another pickler wrote them (pickle.loads reads those). */
PyObject *unpickle_simple(const char *s, Py_ssize_t n);
PyObject *Core_pickle_simple(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_unpickle_simple(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_send(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_channel_send(Core *self, PyObject *const *args, Py_ssize_t nargs);

/* receive.c */
/* Where a broadcast's local calls put their values (run_each_into): a call's value is
 * appended to `collect`; a call that raised or returned a coroutine appends `pending`
 * and is handed to the runtime with its replier, `make_reply(el)` or, without one,
 * `replier(ctx, el)` (a new reference, NULL with an error). */
typedef struct {
    PyObject *collect, *make_reply, *pending;
    Py_ssize_t npending;
    PyObject *(*replier)(void *ctx, PyObject *el);
    void *ctx;
} Collect;
/* Entry method `entry` on every element of the list `elements` (a broadcast's local part):
 * with `into`, each value is collected there; without, values are dropped and errors go to
 * the runtime's handler. 0, or -1 with an error. */
int run_each_into(Core *c, PyObject *elements, long entry, PyObject *args, PyObject *kwargs, Collect *into);
PyObject *rebuild_arrays(Core *c, const char *desc, Py_ssize_t dlen, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg);
int run_entry(Core *c, PyObject *el, PyObject *fn, PyObject *args, PyObject *kwargs, uint32_t src, uint32_t fid);
PyObject *decode_args(Core *c, uint8_t kind, const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg);
PyObject *Core_run_local(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_run_each(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *element_at(Core *c, uint64_t coll, const unsigned char *index_bytes, int nidx);
PyObject *element_of(Core *c, uint64_t coll, PyObject *index);

/* channels.c */
/* Channel message `seq` (tag `tag`) for element `el`; `frames` NULL for one from this
 * PE's own queue. 1 done; 0 for the Python path; -1 error. */
int channel_deliver(Core *c, PyObject *el, uint8_t kind, uint16_t seq, uint32_t tag, uint64_t coll,
                    const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, Frames *frames);
/* A queued channel message of one array between elements of this PE. 1 done; 0 Python path. */
int local_channel(Core *c, PyObject *header, PyObject *body);
/* channel_recv(channel, fallback, future_class): the channel's compiled recv(into=None) */
PyObject *Core_channel_recv(Core *self, PyObject *const *args, Py_ssize_t nargs);

/* exchange.c */
/* An EXCHANGE frame's value (borrowed) for round `round` of all-reduce `seq` of `coll`:
 * 1 done; 0 no compiled exchanges (the Python handler takes it); -1 error. */
int exchange_deliver(Core *c, uint16_t round, uint32_t seq, uint64_t coll, PyObject *value);
void exchanges_free(Exchanges *x);
PyObject *Core_use_exchanges(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_exchange(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_exchange_arrive(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_exchange_forget(Core *c, PyObject *coll);
PyObject *Core_exchanges_under_way(Core *c, PyObject *unused);
PyObject *Core_allreduce(Core *c, PyObject *const *args, Py_ssize_t nargs);
/* The built-in reducers by number (reductions.EXCHANGE_REDUCERS): R_EXACT is combined and
 * finished by Python; R_GATHER only by contributions (partials.c), never by the butterfly. */
enum { R_SUM, R_PRODUCT, R_MAX, R_MIN, R_AND, R_OR, R_NOP, R_EXACT, R_GATHER, R_BUILTINS };
/* The number of built-in reducer `reducer` (R_SUM ... R_GATHER), or -1; and
 * the reducer of a number (borrowed; NULL if none). */
int builtin_reducer(Exchanges *x, PyObject *reducer);
PyObject *exchange_reducer(Exchanges *x, int rid);
/* `lo` and `hi` combined as reducer.combine([lo, hi]) does (a new reference, NULL with an error). */
PyObject *combine_two(Exchanges *x, PyObject *reducer, PyObject *lo, PyObject *hi);
/* contribute.c */
void contributions_free(Contributions *k);
PyObject *Core_use_contributions(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_contribute(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_contributions_release(Core *c, PyObject *coll);
PyObject *Core_contributions_forget(Core *c, PyObject *coll);
PyObject *Core_contributions_under_way(Core *c, PyObject *unused);
PyObject *Core_contribute_method(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_contribution_offer(Core *c, PyObject *const *args, Py_ssize_t nargs);
/* A compact REDUCE of a child's partial to a future (entry TO_FUTURE + reducer, value
 * `item`): 1 taken; 0 the Python path (nothing done); -1 error. */
int contribution_deliver(Core *c, uint16_t entry, uint32_t src, uint32_t seq, uint64_t coll, PyObject *item);
#define TO_FUTURE 0x100 /* reductions.TO_FUTURE */
#define TO_ENTRY 0x200  /* reductions.TO_ENTRY: the same, to an element's entry method */
/* trace.c: record a run of entry method `fn` of `el` (c->trace_runs is set) */
void trace_run(Core *c, PyObject *el, PyObject *fn, uint64_t t0, uint64_t t1);
void trace_runs_free(TraceRuns *t);
PyObject *Core_trace_into(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_trace_flush(Core *c, PyObject *unused);
/* proxies.c: whether `a` and `b` are compiled bound entry methods of one entry of equal proxies */
int bound_entries_same(PyObject *a, PyObject *b);
/* Whether `o` is a compiled bound entry of an element's proxy (`self.collection[0].done`):
 * then its proxy and method name, borrowed. */
int bound_element_entry(PyObject *o, PyObject **proxy, PyObject **name);

/* broadcasts.c */
/* A BROADCAST message passed on down the tree and run here (its frame in the receive
 * buffer if `frames`, else one of this PE's queue with segments `pysegs`); 1 done; 0 for
 * the Python path (nothing done); -1 error. */
int broadcast_deliver(Core *c, const char *h, Py_ssize_t hlen, const char *const *segs, const Py_ssize_t *lens,
                      Py_ssize_t nseg, Frames *frames, PyObject *pysegs);
/* A queued BROADCAST of this PE's own: 1 done; 0 Python path; -1 error. */
int local_broadcast(Core *c, PyObject *header, PyObject *body);
/* Replies to a ret=True broadcast's gather: a lone block (RET_BLOCK frame) or a list of
 * items (RET_GATHER value); 1 taken, 0 not a gather the core holds (Python), -1 error. */
int gather_block_deliver(Core *c, uint32_t fid, uint64_t coll, const unsigned char *index, int nidx,
                         const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg, uint8_t kind, Frames *frames);
int gather_items_deliver(Core *c, uint32_t fid, uint64_t coll, PyObject *value);
void broadcasts_free(Broadcasts *b);
PyObject *Core_use_broadcasts(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_gathers_forget(Core *c, PyObject *coll);
PyObject *Core_gather_offer(Core *c, PyObject *const *args, Py_ssize_t nargs);
PyObject *Core_gathers_under_way(Core *c, PyObject *unused);
#define RET_GATHER 0xFFFF /* reductions.RET_GATHER */
#define RET_BLOCK 0xFFFE  /* reductions.RET_BLOCK */
/* The caller's future `fid`, of this PE, resolved with `result` (Future._resolve): 1 done;
 * 0 the Python way (not a plain pending Future here); -1 error. */
int resolve_here(Core *c, uint32_t fid, PyObject *result);

/* sets.c */
/* Land one array message (descriptor `desc`, `nbytes` of `data`) in the buffer that set
 * `set` posted on channel `ch`, queueing the set's then() if it was the last; `frames`
 * (if not NULL) restarts its receive once the data is copied. 1 landed; 0 it does not
 * fit the buffer (nothing done: the Python path reports it); -1 error. Not counted. */
int set_land(Core *c, PyObject *ch, PyObject *set, const char *desc, Py_ssize_t dlen, const char *data,
             Py_ssize_t nbytes, Frames *frames);
/* Channel.arrive of `array` (kept, not copied) on channel `ch` with no receive pending:
 * it joins the inbox and the next sequence number is expected. 1, or -1 with an error. */
int inbox_push(Core *c, PyObject *ch, PyObject *array);
/* Whether message `seq` is the next channel `ch` takes and none that overtook an earlier
 * one waits (Channel.ahead): only then may a compiled path deliver it. -1 error. */
int channel_in_order(Core *c, PyObject *ch, uint16_t seq);
/* The channel `tag` of element `el`, if the element has one (borrowed), else NULL. */
PyObject *channel_of(PyObject *el, uint32_t tag);
/* A channel message of one plain array from an element of this PE to channel `ch` of
 * another, delivered at once if nothing of that channel is still on its way: into the
 * buffer a receive set posted for it, or (a copy) into the channel's inbox when no
 * receive is pending. Counted as sent and received if `counted`. 1 delivered; 0 not a
 * case for this (queue it); -1 error. */
int channel_now(Core *c, PyObject *ch, uint16_t seq, PyObject *array, int counted);
PyObject *Core_set_post(Core *self, PyObject *const *args, Py_ssize_t nargs);

#endif
