/* Shared declarations of shoal's compiled parts (one extension module, six files):
 *
 *   frames.c    the MPI transport's eager frames: send, poll, idle wait;
 *   core.c      the Core object of one runtime (its counters and methods), with
 *   send.c      the send paths: an entry-method call from proxy to MPI_Isend, and
 *   receive.c   the receive paths: from a received frame to the method call;
 *   sets.c      receive sets: posting a round, landing messages, queueing then();
 *   proxies.c   element proxies' entry methods as C descriptors and bound calls.
 *
 * The Python code they shadow (transport/mpi.py, runtime/scheduler.py,
 * runtime/sending.py, runtime/proxy.py, runtime/receive_sets.py) is the readable
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

/* The frame layout of transport/mpi.py (_PREFIX, _SEG): a prefix of two uint16 (header
 * length, segment count), one uint64 word per segment (nbytes << 1 | FRAME_BULK), the
 * header, then the inline segments. tests/test_wire_format.py checks these against it. */
#define FRAME_PREFIX 4
#define FRAME_SEG 8
#define FRAME_BULK 1

typedef struct Core Core;

typedef struct {
    MPI_Request req;
    char *buf;
} PendingSend;

typedef struct {
    PyObject_HEAD
    MPI_Comm comm;
    MPI_Request recv;
    char *rbuf;
    Py_ssize_t capacity;
    Py_ssize_t threshold;
    PendingSend *sends;
    Py_ssize_t nsends, maxsends;
    int active;
    Core *core; /* the runtime's fast paths, once attached (borrowed: the core owns the frames) */
} Frames;

extern PyTypeObject FramesType;
extern PyTypeObject CoreType;

/* Send one frame whose segments all go inline. 1: sent; 0: too large for an eager
 * frame (the caller uses the Python path); -1: error set. */
int frames_send_inline(Frames *self, int dest, const char *header, Py_ssize_t hlen,
                       const char *const *segs, const Py_ssize_t *lens, Py_ssize_t nseg);

/* A received eager frame for the runtime: 1 delivered; 0 not a case the compiled path
 * handles (deliver it through Python); -1 error set. `restart` is called once the
 * receive buffer has been read, before any Python code runs. */
int core_deliver(Core *core, const char *frame, Py_ssize_t n, Frames *frames);
int frames_restart(Frames *self);

/* An entry-method call (positional arguments) to one element. 1: sent; 0: not handled
 * (use the Python path, nothing was done); -1: error set. */
int core_send_call(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs);
int core_send(Core *core, PyObject *proxy, uint8_t kind, uint16_t entry, uint32_t aux, PyObject *const *args, Py_ssize_t nargs);
/* The same with keyword arguments `kwargs` (a dict); 0 for a local element (Python path). */
int core_send_kw(Core *core, PyObject *proxy, int entry, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs);

/* The compiled core serving runtime `rt`, or NULL (borrowed). */
Core *core_for(PyObject *rt);

int core_init(PyObject *module);
int proxies_init(PyObject *module);

#endif
