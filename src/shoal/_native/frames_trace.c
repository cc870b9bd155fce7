/* A full timeline's record of the frames each PE sends and delivers: the tails and heads
 * of its message arrows, and its bytes in flight (reference: shoal/_runtime/trace_messages.py).
 *
 * No message carries an id of its own: the frames number them. The transport keeps each
 * pair's order (MPI never reorders one source's frames of one tag; a frame with bulk
 * segments waits in Python's per-source queue and every later one from that source
 * waits behind it), so the k-th frame PE a sends to PE b is the k-th frame b takes in
 * from a, whatever its kind: a message that runs no entry method takes its number too.
 * The sender keeps (stamp, dest, bytes, k); the receiver counts each source's frames as
 * they come and keeps (stamp, source, bytes, k) when one is delivered to the runtime:
 * at once when the compiled core or Python takes it from the receive buffer, later for
 * one queued in Python (its bulk data still moving; mpi.py calls trace_deliver then).
 * While a frame is delivered, FrameTrace.cause names it, and a run of an entry method
 * recorded meanwhile keeps it (trace.c; Tracer.run on the Python path): its arrow's head.
 *
 * Kept only while a full timeline is (Frames.trace_on); otherwise Frames.trace is NULL
 * and a frame sent or received costs one test of it. */
#include "native.h"
#include <string.h>

/* the events each list has room for from the start, its pages touched when tracing starts:
 * a page first touched while messages flow costs more than the event itself (in a VM,
 * microseconds: the latency benchmark read 0.10 us a hop slower without this) */
#define FIRST_EVENTS (1 << 16)

int frames_trace_grow(FrameEvent **list, Py_ssize_t *n, Py_ssize_t *cap) {
    Py_ssize_t more = *cap ? *cap * 2 : 1024;
    FrameEvent *grown = PyMem_Realloc(*list, (size_t)more * sizeof(FrameEvent));
    if (!grown) return -1; /* a failed allocation loses the event, not the program */
    *list = grown;
    *cap = more;
    return 0;
}

void frames_trace_free(Frames *self) {
    FrameTrace *t = self->trace;
    if (!t) return;
    self->trace = NULL;
    PyMem_Free(t->sent_to);
    PyMem_Free(t->taken_from);
    PyMem_Free(t->sent);
    PyMem_Free(t->taken);
    PyMem_Free(t);
}

/* trace_on(npes): number and keep frames from now (a full timeline); trace_on(0): stop. */
static PyObject *Frames_trace_on(Frames *self, PyObject *arg) {
    long npes = PyLong_AsLong(arg);
    if (npes == -1 && PyErr_Occurred()) return NULL;
    if (npes < 0 || npes > INT32_MAX) return PyErr_Format(PyExc_ValueError, "trace_on(%ld): a number of PEs", npes);
    frames_trace_free(self);
    if (npes == 0) Py_RETURN_NONE;
    FrameTrace *t = PyMem_Calloc(1, sizeof(FrameTrace));
    if (!t) return PyErr_NoMemory();
    t->npes = (int)npes;
    t->sent_to = PyMem_Calloc((size_t)npes, sizeof(uint32_t));
    t->taken_from = PyMem_Calloc((size_t)npes, sizeof(uint32_t));
    self->trace = t;
    t->sent = PyMem_Malloc(FIRST_EVENTS * sizeof(FrameEvent));
    t->taken = PyMem_Malloc(FIRST_EVENTS * sizeof(FrameEvent));
    if (!t->sent_to || !t->taken_from || !t->sent || !t->taken) {
        frames_trace_free(self);
        return PyErr_NoMemory();
    }
    memset(t->sent, 0, FIRST_EVENTS * sizeof(FrameEvent));
    memset(t->taken, 0, FIRST_EVENTS * sizeof(FrameEvent));
    t->capsent = t->captaken = FIRST_EVENTS;
    Py_RETURN_NONE;
}

static PyObject *events(const FrameEvent *e, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *item = Py_BuildValue("(KIKI)", (unsigned long long)e[i].t, (unsigned int)e[i].peer,
                                       (unsigned long long)e[i].nbytes, (unsigned int)e[i].seq);
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* trace_take() -> (sent, delivered): the events kept since the last call, each
 * (ticks, PE, bytes, number); ([], []) when not tracing. */
static PyObject *Frames_trace_events(Frames *self, PyObject *unused) {
    FrameTrace *t = self->trace;
    if (!t) return Py_BuildValue("([][])");
    PyObject *sent = events(t->sent, t->nsent), *taken = sent ? events(t->taken, t->ntaken) : NULL;
    if (!taken) {
        Py_XDECREF(sent);
        return NULL;
    }
    t->nsent = t->ntaken = 0;
    return Py_BuildValue("(NN)", sent, taken);
}

/* trace_cause() -> int: the frame being delivered (its cause number), 0 for none. */
static PyObject *Frames_trace_cause(Frames *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(self->trace ? self->trace->cause : 0);
}

/* trace_deliver(cause, nbytes) -> the cause before: a frame queued in Python is delivered
 * now (recorded, and the cause of what runs until trace_restore). */
static PyObject *Frames_trace_deliver(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "trace_deliver(cause, nbytes)"); return NULL; }
    unsigned long long cause = PyLong_AsUnsignedLongLong(args[0]);
    Py_ssize_t nbytes = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    FrameTrace *t = self->trace;
    if (!t) return PyLong_FromLong(0);
    uint64_t before = t->cause;
    frames_trace_delivered(self, cause, nbytes);
    t->cause = cause;
    return PyLong_FromUnsignedLongLong(before);
}

/* trace_restore(cause): the cause again after a delivery (trace_deliver's value). */
static PyObject *Frames_trace_restore(Frames *self, PyObject *arg) {
    unsigned long long cause = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    if (self->trace) self->trace->cause = cause;
    Py_RETURN_NONE;
}

/* trace_send(dest, nbytes): a message Python framed itself (bulk segments) left now. */
static PyObject *Frames_trace_send(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "trace_send(dest, nbytes)"); return NULL; }
    long dest = PyLong_AsLong(args[0]);
    Py_ssize_t nbytes = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (self->trace) frames_trace_sent(self, (int)dest, nbytes);
    Py_RETURN_NONE;
}

PyMethodDef frames_trace_methods[] = {
    {"trace_on", (PyCFunction)Frames_trace_on, METH_O, "trace_on(npes): number and keep frames (0: stop)"},
    {"trace_take", (PyCFunction)Frames_trace_events, METH_NOARGS, "trace_take() -> (sent, delivered) since the last call"},
    {"trace_cause", (PyCFunction)Frames_trace_cause, METH_NOARGS, "trace_cause() -> the frame being delivered, or 0"},
    {"trace_deliver", (PyCFunction)(void (*)(void))Frames_trace_deliver, METH_FASTCALL,
     "trace_deliver(cause, nbytes) -> cause before: a frame queued in Python is delivered now"},
    {"trace_restore", (PyCFunction)Frames_trace_restore, METH_O, "trace_restore(cause): after trace_deliver"},
    {"trace_send", (PyCFunction)(void (*)(void))Frames_trace_send, METH_FASTCALL,
     "trace_send(dest, nbytes): a frame Python sent itself"},
    {NULL}
};
