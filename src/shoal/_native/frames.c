/* The compiled eager path of the MPI transport: frame send, frame receive, idle wait.
 *
 * Same wire format as shoal/_transport/mpi.py (its Python code is the reference):
 * a frame is <HH header length, segment count>, one <Q per segment
 * (nbytes << FRAME_SHIFT | flags), the header, then the inline segments. This file only
 * handles frames whose segments are all inline; anything else (bulk segments, or a
 * source with earlier messages still waiting for bulk data) goes back to Python,
 * which keeps per-source order. This file is the transport layer: it never looks
 * inside a message; a received eager frame goes first to the hook a runtime attached
 * (native.h; the runtime's compiled core, core.c), and to Python if the hook declines.
 *
 * Frames arrive by a standing MPI_ANY_SOURCE receive (a persistent request, restarted
 * once its buffer is read: the fastest on one node, 0.58 us against 1.13 us a message
 * by probe on Open MPI 5) or, across nodes, by matched probe (MPI_Improbe from any
 * source, then MPI_Mrecv): MPICH's ch4:ucx netmod loses messages that arrive for an
 * any-source receive between nodes (MPICH 5.0.2 with MPIR_CVAR_NUM_CLIQUES=2: 2 of 5
 * arrived), where a probe sees every message. The transport chooses (mpi.py).
 */
#include "native.h"
#include <mpi4py/mpi4py.h>
#include <string.h>
#include <time.h>

#define FRAME_TAG 1

static int check(int err, const char *what) {
    if (err == MPI_SUCCESS) return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    PyErr_Format(PyExc_RuntimeError, "shoal native transport: %s failed: %s", what, msg);
    return -1;
}

static int Frames_init(Frames *self, PyObject *args, PyObject *kw) {
    PyObject *comm;
    if (self->rbuf) { /* a second __init__ would leak the buffer and the standing receive */
        PyErr_SetString(PyExc_RuntimeError, "shoal._native.Frames is already initialised");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "Onn|p", &comm, &self->capacity, &self->threshold, &self->probe)) return -1;
    /* MPI counts are ints: every frame (at most `capacity` bytes) must fit one */
    if (self->capacity < FRAME_PREFIX || self->capacity > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "frame capacity %zd is not between %d and %d bytes", self->capacity, FRAME_PREFIX, INT_MAX);
        return -1;
    }
    MPI_Comm *c = PyMPIComm_Get(comm);
    if (c == NULL) return -1;
    self->comm = *c;
    self->rbuf = PyMem_Malloc(self->capacity);
    self->maxsends = 64;
    self->sends = PyMem_Malloc(sizeof(PendingSend) * self->maxsends);
    if (!self->rbuf || !self->sends) { PyErr_NoMemory(); return -1; }
    if (!self->probe) {
        if (check(MPI_Recv_init(self->rbuf, (int)self->capacity, MPI_BYTE, MPI_ANY_SOURCE, FRAME_TAG, self->comm, &self->recv), "MPI_Recv_init")) return -1;
        if (check(MPI_Start(&self->recv), "MPI_Start")) { MPI_Request_free(&self->recv); return -1; }
    }
    self->active = 1;
    return 0;
}

static void Frames_dealloc(Frames *self) {
    PyMem_Free(self->rbuf);
    for (Py_ssize_t i = 0; i < self->nsends; i++) PyMem_Free(self->sends[i].buf);
    PyMem_Free(self->sends);
    frames_trace_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Drop the sends that completed; 0 or -1 on error. */
static int complete_sends(Frames *self) {
    Py_ssize_t keep = 0, i = 0;
    int err = 0;
    for (; i < self->nsends; i++) {
        int done = 0;
        if ((err = check(MPI_Test(&self->sends[i].req, &done, MPI_STATUS_IGNORE), "MPI_Test"))) break;
        if (done) PyMem_Free(self->sends[i].buf);
        else self->sends[keep++] = self->sends[i];
    }
    /* after an error, the sends not tested yet stay too: the list holds each live send
     * once and no freed buffer */
    for (; i < self->nsends; i++) self->sends[keep++] = self->sends[i];
    self->nsends = keep;
    return err;
}

int frames_send_inline(Frames *self, int dest, const char *header, Py_ssize_t hlen,
                       const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg) {
    Py_ssize_t total = FRAME_PREFIX + FRAME_SEG * nseg + hlen;
    for (Py_ssize_t i = 0; i < nseg; i++) {
        if (lens[i] >= self->threshold) return 0;
        total += lens[i];
    }
    /* the prefix holds both counts in 16 bits; `total` fits an int as `capacity` does */
    if (total > self->capacity || nseg > 0xFFFF || hlen > 0xFFFF) return 0;
    /* room to keep the request if it does not complete at once, made before the send
     * starts: once it has started, its buffer can be neither dropped nor freed */
    if (self->nsends == self->maxsends) {
        PendingSend *more = PyMem_Realloc(self->sends, sizeof(PendingSend) * self->maxsends * 2);
        if (!more) { PyErr_NoMemory(); return -1; }
        self->sends = more;
        self->maxsends *= 2;
    }
    char *frame = PyMem_Malloc(total ? total : 1);
    if (!frame) { PyErr_NoMemory(); return -1; }
    uint16_t pre[2] = {(uint16_t)hlen, (uint16_t)nseg};
    memcpy(frame, pre, FRAME_PREFIX);
    char *p = frame + FRAME_PREFIX;
    for (Py_ssize_t i = 0; i < nseg; i++) { uint64_t w = (uint64_t)lens[i] << FRAME_SHIFT; memcpy(p, &w, FRAME_SEG); p += FRAME_SEG; }
    memcpy(p, header, hlen); p += hlen;
    for (Py_ssize_t i = 0; i < nseg; i++) { memcpy(p, segs[i], lens[i]); p += lens[i]; }
    MPI_Request req;
    /* a full timeline: stamped before it leaves, so that no delivery precedes its send */
    if (self->trace) frames_trace_sent(self, dest, total - FRAME_PREFIX - FRAME_SEG * nseg);
    if (check(MPI_Isend(frame, (int)total, MPI_BYTE, dest, FRAME_TAG, self->comm, &req), "MPI_Isend")) { PyMem_Free(frame); return -1; }
    int flag = 0;
    int err = check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (!err && flag) { PyMem_Free(frame); return 1; }
    /* still in flight, or its test failed: kept, so that complete_sends (or the
     * deallocation) completes it and frees the frame */
    self->sends[self->nsends].req = req;
    self->sends[self->nsends].buf = frame;
    self->nsends++;
    return err ? -1 : 1;
}

/* send(dest, header, segments) -> bool: False means "not eager-only: use Python". */
static PyObject *Frames_send(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "send(dest, header, segments)"); return NULL; }
    long dest = PyLong_AsLong(args[0]);
    if (dest == -1 && PyErr_Occurred()) return NULL;
    if (dest < 0 || dest > INT_MAX) { PyErr_Format(PyExc_ValueError, "send to PE %ld", dest); return NULL; }
    PyObject *header = args[1], *segs = args[2];
    if (!PyBytes_Check(header) || !PyList_Check(segs)) { PyErr_SetString(PyExc_TypeError, "header must be bytes, segments a list"); return NULL; }
    Py_ssize_t nseg = PyList_GET_SIZE(segs);
    if (nseg > 16) Py_RETURN_FALSE;
    Py_buffer views[16];
    const char *ptrs[16];
    Py_ssize_t lens[16], got = 0;
    int sent = 0;
    for (; got < nseg; got++) {
        PyObject *seg = PyList_GET_ITEM(segs, got);
        if (!PyObject_CheckBuffer(seg)) goto done; /* device memory (a DeviceSegment): Python sends it */
        if (PyObject_GetBuffer(seg, &views[got], PyBUF_C_CONTIGUOUS) < 0) { sent = -1; goto done; }
        ptrs[got] = views[got].buf;
        lens[got] = views[got].len;
        if (lens[got] >= self->threshold) { got++; goto done; }
    }
    sent = frames_send_inline(self, (int)dest, PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header), ptrs, lens, nseg);
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    if (sent < 0) return NULL;
    return PyBool_FromLong(sent);
}

/* Split an eager-only frame (a bytearray that receive() checked is well formed) into
 * (header, [segment views]) and deliver. */
static int deliver_frame(PyObject *deliver, PyObject *copy) {
    const char *frame = PyByteArray_AS_STRING(copy);
    uint16_t pre[2];
    memcpy(pre, frame, FRAME_PREFIX);
    Py_ssize_t hlen = pre[0], nseg = pre[1];
    PyObject *view = PyMemoryView_FromObject(copy);
    if (!view) return -1;
    Py_ssize_t off = FRAME_PREFIX + FRAME_SEG * nseg;
    PyObject *header = PyBytes_FromStringAndSize(frame + off, hlen);
    PyObject *segs = PyList_New(nseg);
    if (!header || !segs) goto fail;
    off += hlen;
    for (Py_ssize_t i = 0; i < nseg; i++) {
        uint64_t w;
        memcpy(&w, frame + FRAME_PREFIX + FRAME_SEG * i, FRAME_SEG);
        Py_ssize_t len = (Py_ssize_t)(w >> FRAME_SHIFT);
        /* the first segment (pickle stream or array descriptor) is read-only data:
         * give it as bytes, so it can be a dict key and pickle reads it directly */
        PyObject *seg = i == 0 ? PyBytes_FromStringAndSize(frame + off, len) : PySequence_GetSlice(view, off, off + len);
        if (!seg) goto fail;
        PyList_SET_ITEM(segs, i, seg);
        off += len;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(deliver, header, segs, NULL);
    Py_DECREF(view); Py_DECREF(header); Py_DECREF(segs);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
fail:
    Py_DECREF(view); Py_XDECREF(header); Py_XDECREF(segs);
    return -1;
}

int frames_restart(Frames *self) {
    if (!self->reading) return 0; /* freed already (a hook that read it, then declined) */
    self->reading = 0;
    return self->probe ? 0 : check(MPI_Start(&self->recv), "MPI_Start");
}

/* Take the next frame into the receive buffer, if one came: 1 with its source and size,
 * 0 if none, -1 with an error set. */
static int next_frame(Frames *self, int *src, int *n) {
    int flag = 0;
    MPI_Status st;
    MPI_Message msg = MPI_MESSAGE_NULL;
    if (!self->probe) {
        if (check(MPI_Test(&self->recv, &flag, &st), "MPI_Test")) return -1;
    } else if (check(MPI_Improbe(MPI_ANY_SOURCE, FRAME_TAG, self->comm, &flag, &msg, &st), "MPI_Improbe")) {
        return -1;
    }
    if (!flag) return 0;
    if (check(MPI_Get_count(&st, MPI_BYTE, n), "MPI_Get_count")) return -1;
    *src = st.MPI_SOURCE;
    if (self->probe) {
        if (*n > self->capacity) { /* every PE sends frames of at most its capacity: settings differ */
            PyErr_Format(PyExc_RuntimeError, "shoal native transport: a frame of %d bytes from PE %d is larger than "
                         "this PE's frame capacity (%zd bytes): every PE of a job must run with the same "
                         "SHOAL_FRAME_CAPACITY and SHOAL_RENDEZVOUS_THRESHOLD", *n, *src, self->capacity);
            return -1;
        }
        if (check(MPI_Mrecv(self->rbuf, *n, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv")) return -1;
    }
    self->reading = 1;
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* serve()'s stamps, two per message: the time-stamp counter where there is one (9 ns a
 * read here, against 24 ns for clock_gettime), turned into seconds by comparing it with
 * now() once per serve() call; now() itself elsewhere. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline double stamp(void) { return (double)__rdtsc(); }
#else
static inline double stamp(void) { return now(); }
#endif

/* Receive frames until none is waiting, or until the first one if `spin` seconds
 * of waiting are allowed. Eager-only frames from sources with nothing queued in
 * Python are delivered at once (through the attached hook when it takes them, else
 * deliver(header, segments)); every other frame goes to slow(source, bytearray) in
 * arrival order. Returns the number of frames received, or -1 with an error set. */
static long receive_frames(Frames *self, PyObject *deliver, PyObject *slow, PyObject *stalled, PyObject *arrived, double spin) {
    long count = 0;
    double deadline = spin > 0 ? now() + spin : 0;
    unsigned tries = 0;
    if (self->nsends && complete_sends(self)) return -1;
    while (self->active && !self->reading) {
        int src = 0, n = 0, got = next_frame(self, &src, &n);
        if (got < 0) return -1;
        if (!got) {
            if (count || spin <= 0 || (++tries % 16 == 0 && now() > deadline)) break;
            continue;
        }
        if (self->stamp_first && tries) {
            self->first_at = stamp();
            self->stamp_first = 0;
        }
        /* eager: every segment inline and inside the frame. A frame that is not well
         * formed is not: the Python path unpacks it, and reports it. */
        int eager = n >= FRAME_PREFIX;
        if (eager) {
            uint16_t pre[2];
            memcpy(pre, self->rbuf, FRAME_PREFIX);
            Py_ssize_t rest = (Py_ssize_t)n - FRAME_PREFIX - FRAME_SEG * (Py_ssize_t)pre[1] - pre[0];
            eager = rest >= 0;
            for (Py_ssize_t i = 0; eager && i < pre[1]; i++) {
                uint64_t w;
                memcpy(&w, self->rbuf + FRAME_PREFIX + FRAME_SEG * i, FRAME_SEG);
                if ((w & FRAME_BULK) || (w >> FRAME_SHIFT) > (uint64_t)rest) eager = 0;
                else rest -= (Py_ssize_t)(w >> FRAME_SHIFT);
            }
        }
        /* queued: it waits behind messages still in Python, of any source (arrived) or
         * of its own waiting for bulk data (stalled), to keep per-source order */
        int queued = deliver == Py_None;
        PyObject *key = NULL;
        if (!queued) {
            Py_ssize_t backlog = PyObject_Length(arrived);
            if (backlog < 0) return -1;
            if (backlog > 0) {
                queued = 1;
            } else if (PyDict_GET_SIZE(stalled)) {
                if (!(key = PyLong_FromLong(src))) return -1;
                queued = PyDict_Contains(stalled, key);
                if (queued < 0) { Py_DECREF(key); return -1; }
            }
        }
        count++;
        /* a full timeline: the frame's number, its cause while it is delivered (frames_trace.c) */
        uint64_t before = 0;
        if (self->trace) {
            before = self->trace->cause;
            self->trace->cause = frames_trace_take(self, src);
            if (eager && !queued) frames_trace_delivered(self, self->trace->cause, (Py_ssize_t)n - FRAME_PREFIX);
        }
        if (eager && !queued && self->hook) {
            int done = self->hook(self->hook_owner, self->rbuf, n, self);  /* frees the buffer itself */
            if (done && self->trace) self->trace->cause = before;
            if (done < 0) { Py_XDECREF(key); return -1; }
            if (done) { Py_XDECREF(key); continue; }
        }
        /* one copy out of the receive buffer, which is then free for the next frame */
        PyObject *copy = PyByteArray_FromStringAndSize(self->rbuf, n);
        if (!copy || frames_restart(self)) {
            Py_XDECREF(copy);
            Py_XDECREF(key);
            if (self->trace) self->trace->cause = before;
            return -1;
        }
        int err = 0;
        if (eager && !queued) {
            err = deliver_frame(deliver, copy);
        } else {
            if (!key) key = PyLong_FromLong(src);
            PyObject *r = key ? PyObject_CallFunctionObjArgs(slow, key, copy, NULL) : NULL;
            if (r) Py_DECREF(r); else err = -1;
        }
        Py_DECREF(copy);
        Py_XDECREF(key);
        if (self->trace) self->trace->cause = before;
        if (err) return -1;
    }
    return count;
}

static long receive(Frames *self, PyObject *deliver, PyObject *slow, PyObject *stalled, PyObject *arrived, double spin) {
    long n = receive_frames(self, deliver, slow, stalled, arrived, spin);
    if (n < 0 && self->reading) { /* the frame being read is lost with the error: never block the next */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        frames_restart(self);
        PyErr_Restore(type, value, tb);
    }
    return n;
}

/* poll(deliver, slow, stalled, arrived) -> number of frames received. */
static PyObject *Frames_poll(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[2])) { PyErr_SetString(PyExc_TypeError, "poll(deliver, slow, stalled: dict, arrived)"); return NULL; }
    long n = receive(self, args[0], args[1], args[2], args[3], 0.0);
    return n < 0 ? NULL : PyLong_FromLong(n);
}

/* wait(deliver, slow, stalled, arrived, seconds): poll, spinning on MPI_Test for up to
 * `seconds` until a frame comes (the idle loop of a PE that has its core to itself). */
static PyObject *Frames_wait(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyDict_Check(args[2])) { PyErr_SetString(PyExc_TypeError, "wait(deliver, slow, stalled: dict, arrived, seconds)"); return NULL; }
    double spin = PyFloat_AsDouble(args[4]);
    if (spin == -1.0 && PyErr_Occurred()) return NULL;
    long n = receive(self, args[0], args[1], args[2], args[3], spin);
    return n < 0 ? NULL : PyLong_FromLong(n);
}

/* Whether the Python loop has work: a container of `quiet` is not empty, done() is true
 * (None: not asked), or the first of `timers` (a heap of (when, ...) on time.monotonic's
 * clock) is due at `t`. -1: error set. */
static int python_has_work(PyObject *quiet, PyObject *done, PyObject *timers, double t) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(quiet); i++) {
        Py_ssize_t len = PyObject_Length(PyTuple_GET_ITEM(quiet, i));
        if (len) return len < 0 ? -1 : 1;
    }
    if (PyList_GET_SIZE(timers)) {
        PyObject *first = PyList_GET_ITEM(timers, 0);
        if (PyTuple_Check(first) && PyTuple_GET_SIZE(first)) {
            double due = PyFloat_AsDouble(PyTuple_GET_ITEM(first, 0));
            if (due == -1.0 && PyErr_Occurred()) return -1;
            if (t >= due) return 1;
        }
    }
    if (PyErr_CheckSignals() < 0) return -1;
    if (done == Py_None) return 0;
    PyObject *r = PyObject_CallNoArgs(done);
    if (!r) return -1;
    int yes = PyObject_IsTrue(r);
    Py_DECREF(r);
    return yes;
}

/* serve(deliver, slow, stalled, arrived, seconds, quiet, done, timers) -> (frames, idle,
 * quiet_since): wait() again and again without going back to Python between messages, as
 * the idle loop of a PE with its core to itself would (Engine.run_until): while each frame
 * comes within `seconds` of the last and the Python loop has no work (python_has_work).
 * idle: the seconds spent waiting before the frames; quiet_since: when the last wait for
 * one began, if it ended with none (time.monotonic's clock), else 0.0. (0, 0.0, 0.0): no
 * frame came. */
static PyObject *Frames_serve(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyDict_Check(args[2]) || !PyTuple_Check(args[5]) || !PyList_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "serve(deliver, slow, stalled: dict, arrived, seconds, quiet: tuple, done, timers: list)");
        return NULL;
    }
    double spin = PyFloat_AsDouble(args[4]);
    if (spin == -1.0 && PyErr_Occurred()) return NULL;
    long total = 0;
    double began = now(), first = stamp(), start = first, waited = 0; /* in stamps */
    for (;;) {
        self->stamp_first = 1;
        self->first_at = 0;
        long n = receive(self, args[0], args[1], args[2], args[3], spin);
        self->stamp_first = 0;
        if (n < 0) return NULL;
        if (n == 0) break;
        total += n;
        if (self->first_at > 0) {
            waited += self->first_at - start;
            if (self->idle_hook) self->idle_hook(self->hook_owner, (uint64_t)start, (uint64_t)self->first_at);
        }
        start = stamp();
        /* (timers are on time.monotonic's clock: now() only where one is set) */
        int work = python_has_work(args[5], args[6], args[7], PyList_GET_SIZE(args[7]) ? now() : 0.0);
        if (work < 0) return NULL;
        if (work) {
            start = 0;
            break;
        }
    }
    if (!total) return Py_BuildValue("(ldd)", 0L, 0.0, 0.0);
    double ended = now(), last = stamp();
    double per_second = last > first && ended > began ? (last - first) / (ended - began) : 0;
    if (per_second <= 0) return Py_BuildValue("(ldd)", total, 0.0, 0.0);
    return Py_BuildValue("(ldd)", total, waited / per_second, start > 0 ? ended - (last - start) / per_second : 0.0);
}

static PyObject *Frames_pending(Frames *self, PyObject *unused) {
    if (self->nsends && complete_sends(self)) return NULL;
    return PyLong_FromSsize_t(self->nsends);
}

static PyObject *Frames_close(Frames *self, PyObject *unused) {
    if (self->active) {
        self->active = 0;
        if (!self->probe) {
            if (check(MPI_Cancel(&self->recv), "MPI_Cancel")) return NULL;
            if (check(MPI_Wait(&self->recv, MPI_STATUS_IGNORE), "MPI_Wait")) return NULL;
            if (check(MPI_Request_free(&self->recv), "MPI_Request_free")) return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef Frames_methods[16] = { /* and frames_trace_methods, added at import */
    {"send", (PyCFunction)(void (*)(void))Frames_send, METH_FASTCALL, "send(dest, header, segments) -> bool (False: not eager-only)"},
    {"poll", (PyCFunction)(void (*)(void))Frames_poll, METH_FASTCALL, "poll(deliver, slow, stalled, arrived) -> frames received"},
    {"wait", (PyCFunction)(void (*)(void))Frames_wait, METH_FASTCALL, "wait(deliver, slow, stalled, arrived, seconds) -> frames received"},
    {"serve", (PyCFunction)(void (*)(void))Frames_serve, METH_FASTCALL,
     "serve(deliver, slow, stalled, arrived, seconds, quiet, done, timers) -> (frames, idle, quiet_since)"},
    {"pending", (PyCFunction)Frames_pending, METH_NOARGS, "number of eager sends still in flight"},
    {"close", (PyCFunction)Frames_close, METH_NOARGS, "receive no more frames (cancel the standing receive)"},
    {NULL}
};

PyTypeObject FramesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal._native.Frames",
    .tp_basicsize = sizeof(Frames),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Eager frames over one MPI communicator.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Frames_init,
    .tp_dealloc = (destructor)Frames_dealloc,
    .tp_methods = Frames_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_shoal_native", "shoal's compiled per-message paths", -1, NULL};

PyMODINIT_FUNC PyInit__shoal_native(void) {
    if (import_mpi4py() < 0) return NULL;
    static int joined = 0; /* once per process, however often the module is made */
    if (!joined) {
        Py_ssize_t at = 0;
        while (Frames_methods[at].ml_name) at++;
        for (PyMethodDef *m = frames_trace_methods; m->ml_name; m++) Frames_methods[at++] = *m;
        joined = 1;
    }
    if (PyType_Ready(&FramesType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&FramesType);
    if (PyModule_AddObject(m, "Frames", (PyObject *)&FramesType) < 0) { Py_DECREF(&FramesType); Py_DECREF(m); return NULL; }
    if (core_init(m) < 0 || proxies_init(m) < 0 || tasks_init(m) < 0 || contract_init(m) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
