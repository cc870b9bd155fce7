/* The timeline's record of the compiled path's entry methods, kept in C (reference:
 * Tracer.ticked and SummaryTracer.ticked in shoal/_runtime/tracing.py and trace_bins.py).
 *
 * Calling the Python tracer after every entry method cost more than a short method
 * itself (135 ns; 340 ns in summary mode). Here a run costs a few stores instead:
 *
 * - a full timeline keeps each run (its class, function, element index and times in
 *   ticks) in an array that goes to the tracer when the job exports its trace
 *   (Core.trace_flush), or in batches of TRACE_BATCH runs on a long job;
 * - a summary keeps one run per entry method and bin (its calls and its busy ticks,
 *   from its first start to its last end) and hands the bin's runs over when a run
 *   starts in a later bin: once a bin, however many entry methods ran in it.
 *
 * The waits of the compiled serve loop (frames.c) are kept alike, as runs of None: so a
 * traced job serves messages in C as an untraced one does, its idle periods recorded.
 *
 * A full timeline's run also keeps the message that caused it: the number of the frame
 * being delivered when it ran (frames_trace.c), 0 for none (a local message's, one held
 * back and run later, a run of summary mode).
 *
 * The tracer takes them as a list of (class, function, t0, t1, index, calls, busy ticks,
 * cause) (Tracer.ticked_runs). */
#include "core.h"

#define TRACE_BATCH (1 << 20) /* a full timeline's runs kept before they go to the tracer */
#define TRACE_METHODS 64      /* a summary's entry methods in one bin before they go */

typedef struct {
    PyObject *cls, *fn, *index; /* strong references */
    uint64_t t0, t1, busy, calls, cause;
} Run;

struct TraceRuns {
    uint64_t origin, width; /* a summary's bins, in ticks (width 0: a full timeline) */
    uint64_t bin;           /* the bin of the runs kept */
    Run *runs;
    Py_ssize_t n, capacity;
};

static void clear_runs(TraceRuns *t) {
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Py_XDECREF(t->runs[i].cls);
        Py_XDECREF(t->runs[i].fn);
        Py_XDECREF(t->runs[i].index);
    }
    t->n = 0;
}

void trace_runs_free(TraceRuns *t) {
    if (!t) return;
    clear_runs(t);
    PyMem_Free(t->runs);
    PyMem_Free(t);
}

/* The runs kept, to the tracer (c->trace(list)). 0, or -1 with an error. */
static int hand_runs(Core *c) {
    TraceRuns *t = c->trace_runs;
    if (!t || t->n == 0) return 0;
    PyObject *list = PyList_New(t->n);
    for (Py_ssize_t i = 0; list && i < t->n; i++) {
        Run *r = &t->runs[i];
        PyObject *item = Py_BuildValue("(OOKKOKKK)", r->cls, r->fn, (unsigned long long)r->t0, (unsigned long long)r->t1,
                                       r->index ? r->index : Py_None, (unsigned long long)r->calls,
                                       (unsigned long long)r->busy, (unsigned long long)r->cause);
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    clear_runs(t);
    if (!list) return -1;
    PyObject *done = c->trace && c->trace != Py_None ? PyObject_CallOneArg(c->trace, list) : Py_NewRef(Py_None);
    Py_DECREF(list);
    if (!done) return -1;
    Py_DECREF(done);
    return 0;
}

/* Record that `fn` of an element of class `cls` ran from tick `t0` to `t1` (both None:
 * the PE waited idle then). An error of the tracer's is dropped: the timeline loses a
 * run, the program goes on. */
static void record(Core *c, PyObject *cls, PyObject *fn, PyObject *index, uint64_t t0, uint64_t t1) {
    TraceRuns *t = c->trace_runs;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int spans = 0;
    if (t->width) { /* a summary: the run joins its method's in this bin */
        uint64_t b0 = t0 > t->origin ? (t0 - t->origin) / t->width : 0;
        uint64_t b1 = t1 > t->origin ? (t1 - t->origin) / t->width : 0;
        spans = b1 != b0;
        if (b0 != t->bin || t->n == TRACE_METHODS) {
            if (hand_runs(c) < 0) PyErr_Clear();
            t->bin = b0;
        }
        if (!spans) {
            for (Py_ssize_t i = 0; i < t->n; i++) {
                Run *r = &t->runs[i];
                if (r->fn == fn && r->cls == cls) {
                    r->t1 = t1;
                    r->busy += t1 - t0;
                    r->calls++;
                    PyErr_Restore(type, value, tb);
                    return;
                }
            }
        }
    } else if (t->n == TRACE_BATCH && hand_runs(c) < 0) {
        PyErr_Clear();
    }
    if (t->n == t->capacity) {
        Py_ssize_t cap = t->capacity ? t->capacity * 2 : 64;
        Run *more = PyMem_Realloc(t->runs, (size_t)cap * sizeof(Run));
        if (!more) { PyErr_Restore(type, value, tb); return; } /* (the run is lost, not the program) */
        t->runs = more;
        t->capacity = cap;
    }
    Run *r = &t->runs[t->n++];
    r->cls = Py_NewRef(cls);
    r->fn = Py_NewRef(fn);
    r->index = Py_XNewRef(index);
    r->t0 = t0;
    r->t1 = t1;
    r->busy = t1 - t0;
    r->calls = 1;
    r->cause = !t->width && c->frames && c->frames->trace ? c->frames->trace->cause : 0;
    if (spans && hand_runs(c) < 0) PyErr_Clear(); /* (a run over bins goes as it is: the tracer splits it) */
    PyErr_Restore(type, value, tb);
}

void trace_run(Core *c, PyObject *el, PyObject *fn, uint64_t t0, uint64_t t1) {
    record(c, (PyObject *)Py_TYPE(el), fn, SLOT(el, shoal_slots.chare_index), t0, t1);
}

/* The frames' idle hook: the PE waited from tick `t0` to `t1` inside serve(). */
static void idle_hook(void *core, uint64_t t0, uint64_t t1) {
    Core *c = core;
    if (c->trace_runs && t1 > t0) record(c, Py_None, Py_None, NULL, t0, t1);
}

/* trace_into(tracer, origin, width) -> bool: record the compiled path's runs for `tracer`
 * (a callable taking lists of runs), in bins of `width` ticks from tick `origin`, or
 * (width 0) every run; trace_into(None, 0, 0): stop (what is kept goes first). True
 * where the waits of the compiled serve loop are recorded too (as runs of None). */
PyObject *Core_trace_into(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "trace_into(tracer, origin, width)");
        return NULL;
    }
    unsigned long long origin = PyLong_AsUnsignedLongLong(args[1]), width = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (c->trace_runs && hand_runs(c) < 0) return NULL;
    if (args[0] == Py_None) {
        trace_runs_free(c->trace_runs);
        c->trace_runs = NULL;
        Py_CLEAR(c->trace);
        if (c->frames) c->frames->idle_hook = NULL;
        Py_RETURN_FALSE;
    }
    if (!c->trace_runs && !(c->trace_runs = PyMem_Calloc(1, sizeof(TraceRuns)))) return PyErr_NoMemory();
    c->trace_runs->origin = origin;
    c->trace_runs->width = width;
    c->trace_runs->bin = 0;
    Py_XSETREF(c->trace, Py_NewRef(args[0]));
    if (!stamps_are_ticks() || !c->frames || c->frames->hook_owner != c) Py_RETURN_FALSE;
    c->frames->idle_hook = idle_hook;
    Py_RETURN_TRUE;
}

/* trace_flush(): the runs kept, to the tracer now (the job exports its trace). */
PyObject *Core_trace_flush(Core *c, PyObject *unused) {
    if (hand_runs(c) < 0) return NULL;
    Py_RETURN_NONE;
}
