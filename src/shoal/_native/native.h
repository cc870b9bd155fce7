/* The transport layer of shoal's compiled parts, and what every file includes.
 *
 * One extension module, two layers (docs/architecture.md):
 *
 *   frames.c    transport: the MPI transport's eager frames: send, poll, idle wait;
 *               it knows nothing of the runtime and hands received frames to a hook;
 *
 *   runtime (core.h), which attaches itself to the frames' hook:
 *   core.c      the Core object of one runtime (its counters and methods), with
 *   send.c      the send paths: an entry-method call from proxy to MPI_Isend, and
 *   simple_pickle.c the pickle of simple arguments (numbers, short strs, tuples), both ways;
 *   receive.c   the receive paths: from a received frame to the method call;
 *   channels.c  channel messages: completing a receive, or joining the inbox;
 *   sets.c      receive sets: posting a round, landing messages, queueing then();
 *   proxies.c   element proxies' entry methods as C descriptors and bound calls;
 *   tasks.c     a coroutine's resumption (Task.step);
 *   exchange.c  the butterfly all-reduce, from Chare.allreduce to the waiter's resumption;
 *   broadcasts.c broadcasts passed on and run, and the values of ret=True ones gathered.
 *
 * The Python code they shadow (_transport/mpi.py, _runtime/runtime.py,
 * _runtime/sending.py, _runtime/proxy.py, _runtime/receive_sets.py) is the readable
 * reference and the fallback: every case these files do not handle goes back to it.
 */
#ifndef SHOAL_NATIVE_H
#define SHOAL_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shoal's wire format is little-endian; this compiled path assumes a little-endian host"
#endif

/* The frame layout of _transport/mpi.py (_PREFIX, _SEG): a prefix of two uint16 (header
 * length, segment count), one uint64 word per segment (nbytes << FRAME_SHIFT, with
 * FRAME_BULK set for a segment sent by rendezvous and FRAME_DEVICE for one in device
 * memory), the header, then the inline segments. tests/transport/test_wire_format.py checks these
 * against it. */
#define FRAME_PREFIX 4
#define FRAME_SEG 8
#define FRAME_BULK 1
#define FRAME_DEVICE 2
#define FRAME_SHIFT 2

typedef struct {
    MPI_Request req;
    char *buf;
} PendingSend;

/* A message's transport event for a full timeline (frames_trace.c): its stamp (the
 * core's ticks), the other PE, the frame's number from that PE to this one or from this
 * one to that (1, 2, ...: the transport keeps each pair's order, so the k-th frame a
 * sends to b is the k-th that b takes from a) and its bytes (header and segments). */
typedef struct {
    uint64_t t, nbytes;
    uint32_t peer, seq;
} FrameEvent;

/* What the frames record while a full timeline is kept (NULL otherwise: one test of a
 * pointer per frame sent and received is all tracing off costs). */
typedef struct {
    uint32_t *sent_to, *taken_from; /* frames numbered so far, per PE */
    int npes;
    FrameEvent *sent, *taken;       /* sends; deliveries to the runtime */
    Py_ssize_t nsent, ntaken, capsent, captaken;
    /* the frame being delivered, (source + 1) << 32 | its number; 0: none. An entry
     * method run meanwhile was caused by it (trace.c keeps it with the run). */
    uint64_t cause;
} FrameTrace;

typedef struct {
    PyObject_HEAD
    MPI_Comm comm;
    MPI_Request recv; /* the standing receive (not `probe`) */
    int probe;        /* 1: frames are received by matched probe, not by a standing receive */
    char *rbuf;
    Py_ssize_t capacity;
    Py_ssize_t threshold;
    PendingSend *sends;
    Py_ssize_t nsends, maxsends;
    int active;
    /* 1 while the receive buffer holds a frame not yet read: no frame is received into it
     * until frames_restart says it has been (a nested poll must not overwrite it) */
    int reading;
    /* The runtime's handler of received eager frames, once one attached (a core owns the
     * frames, so `hook_owner` is borrowed): 1 delivered; 0 not a case it handles (the frame
     * goes to Python); -1 error set. It frees the buffer (frames_restart) once it has read it. */
    int (*hook)(void *hook_owner, const char *frame, Py_ssize_t n, void *frames);
    void *hook_owner;
    /* Where serve() tells each wait that ended with a frame (its start and end stamps, time-
     * stamp counter ticks): a timeline's idle periods (the core's trace.c), or NULL. Set only
     * where the stamps are the ticks the core times entry methods with (stamps_are_ticks). */
    void (*idle_hook)(void *hook_owner, uint64_t t0, uint64_t t1);
    /* serve(): when the first frame of a receive that had to wait arrived (0: it waited not) */
    int stamp_first;
    double first_at;
    FrameTrace *trace; /* a full timeline's record of frames (frames_trace.c), or NULL */
} Frames;

extern PyTypeObject FramesType;

/* Whether serve()'s stamps are the time-stamp counter, the core's ticks (frames.c). */
static inline int stamps_are_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return 1;
#else
    return 0;
#endif
}

/* Send one frame whose segments all go inline. 1: sent; 0: too large for an eager
 * frame (the caller uses the Python path); -1: error set. */
int frames_send_inline(Frames *self, int dest, const char *header, Py_ssize_t hlen,
                       const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg);

/* A cheap clock, for the time elements spend in entry methods (load balancing) and the
 * stamps of a timeline's frame events (frames_trace.c): the time-stamp counter where
 * there is one (9 ns a read here, against 24 ns for clock_gettime), nanoseconds
 * elsewhere; Core.ticks() lets Python convert. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t now_ticks(void) { return __rdtsc(); }
#else
#include <time.h>
static inline uint64_t now_ticks(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
#endif

/* frames_trace.c: room for one more event in `*list` (0; -1: none, the event is lost) */
int frames_trace_grow(FrameEvent **list, Py_ssize_t *n, Py_ssize_t *cap);

/* one event more (inline: a full timeline pays it per frame sent and delivered) */
static inline void frames_trace_keep(FrameEvent **list, Py_ssize_t *n, Py_ssize_t *cap, uint32_t peer, uint32_t seq,
                                     Py_ssize_t nbytes) {
    if (*n == *cap && frames_trace_grow(list, n, cap) < 0) return;
    FrameEvent *e = &(*list)[(*n)++];
    e->t = now_ticks();
    e->nbytes = (uint64_t)(nbytes > 0 ? nbytes : 0);
    e->peer = peer;
    e->seq = seq;
}

/* a frame of `nbytes` goes to `dest` (self->trace is set) */
static inline void frames_trace_sent(Frames *self, int dest, Py_ssize_t nbytes) {
    FrameTrace *t = self->trace;
    if (dest >= 0 && dest < t->npes) frames_trace_keep(&t->sent, &t->nsent, &t->capsent, (uint32_t)dest, ++t->sent_to[dest], nbytes);
}

/* a frame came from `src` (self->trace is set): its cause number (see FrameTrace.cause) */
static inline uint64_t frames_trace_take(Frames *self, int src) {
    FrameTrace *t = self->trace;
    return src >= 0 && src < t->npes ? ((uint64_t)src + 1) << 32 | ++t->taken_from[src] : 0;
}

/* the frame of cause number `cause` (of `nbytes`) is delivered to the runtime now */
static inline void frames_trace_delivered(Frames *self, uint64_t cause, Py_ssize_t nbytes) {
    FrameTrace *t = self->trace;
    if (cause) frames_trace_keep(&t->taken, &t->ntaken, &t->captaken, (uint32_t)(cause >> 32) - 1, (uint32_t)cause, nbytes);
}

void frames_trace_free(Frames *self);
extern PyMethodDef frames_trace_methods[];

/* The frame in the receive buffer has been read: the next one may be received into it.
 * Nothing may read the buffer after this call: with a standing receive, a peer may write
 * the next frame into it at once (Open MPI's single-copy transfers do, from the sender). */
int frames_restart(Frames *self);

/* The runtime layer's parts add their types to the module (core.c, proxies.c). */
int core_init(PyObject *module);
int proxies_init(PyObject *module);
int tasks_init(PyObject *module);
int contract_init(PyObject *module);

#endif
