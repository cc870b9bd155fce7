/* The compiled pickle of simple arguments (reference: pickle.dumps(args, 5) and
 * pickle.loads): a call's arguments, a reduction's value or a reduction's target made of
 * None, bools, floats, 64-bit ints, short strs, small plain arrays, pending futures and
 * tuples of them go out and come in without the Python encoder or an Unpickler. The bytes
 * are a pickle that pickle.loads reads back equal (an array as message._rebuild_array of
 * a bytearray, as shoal's pickler writes one in-band); the reader takes only streams this
 * writer makes. */
#include "core.h"

/* an array in a simple pickle: _rebuild_array(bytearray, dtype.str, shape) */
static const char ARRAY_MODULE[] = "shoal._runtime.message", ARRAY_NAME[] = "_rebuild_array";

/* At most this many values (tuples among them) in one stream, tuples this deep: the
 * reader's stack has room for them all. */
#define SIMPLE_ITEMS_MAX 64
#define SIMPLE_DEPTH_MAX 4

/* An int of 64 bits (`v`) as pickle writes it, at `p`: the end of what was written. */
static char *pickle_int(char *p, long long v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        int32_t w = (int32_t)v; /* BININT: 4 bytes, little-endian, signed */
        *p++ = 'J';
        for (int k = 0; k < 4; k++) *p++ = (char)((uint32_t)w >> (8 * k));
    } else {
        *p++ = '\x8a'; /* LONG1: 8 bytes, little-endian two's complement */
        *p++ = 8;
        for (int k = 0; k < 8; k++) *p++ = (char)((uint64_t)v >> (8 * k));
    }
    return p;
}

/* A str of at most 255 bytes of UTF-8 as pickle writes it (SHORT_BINUNICODE), at `p` with
 * room to `end`: the end of what was written, or NULL (too long, or no room). */
static char *pickle_str(char *p, char *end, PyObject *s) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
    if (!utf8 || n > 255 || end - p < n + 2) { PyErr_Clear(); return NULL; }
    *p++ = '\x8c';
    *p++ = (char)n;
    memcpy(p, utf8, (size_t)n);
    return p + n;
}

/* A pending Future (shoal's own class, not a subclass) as pickle writes it: what its
 * __reduce__ returns (which also keeps it where its owner answers waiters elsewhere),
 * _rebuild_future(owner, fid, origin), as STACK_GLOBAL and REDUCE. At `p` with room to
 * `end`: the end of what was written, or NULL (not such a future, or no room). */
static char *pickle_future(char *p, char *end, PyObject *fut) {
    PyObject *r = PyObject_CallMethodNoArgs(fut, shoal_names.reduce), *fn, *args, *module = NULL, *name = NULL;
    if (!r || !PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyTuple_Check(args = PyTuple_GET_ITEM(r, 1)) ||
        PyTuple_GET_SIZE(args) != 3 || !PyLong_CheckExact(PyTuple_GET_ITEM(args, 0)) || !PyLong_CheckExact(PyTuple_GET_ITEM(args, 1))) {
        PyErr_Clear();
        Py_XDECREF(r);
        return NULL;
    }
    fn = PyTuple_GET_ITEM(r, 0);
    module = PyObject_GetAttr(fn, shoal_names.module);
    name = module ? PyObject_GetAttr(fn, shoal_names.qualname) : NULL;
    long long owner = PyLong_AsLongLong(PyTuple_GET_ITEM(args, 0)), fid = PyLong_AsLongLong(PyTuple_GET_ITEM(args, 1));
    char *q = name && !PyErr_Occurred() ? pickle_str(p, end, module) : NULL;
    if (q) q = pickle_str(q, end, name);
    if (q && end - q < 1 + 2 * 10) q = NULL;
    if (q) {
        *q++ = '\x93'; /* STACK_GLOBAL */
        q = pickle_int(pickle_int(q, owner), fid);
        q = pickle_str(q, end, PyTuple_GET_ITEM(args, 2));
    }
    if (q && end - q < 2) q = NULL;
    if (q) {
        *q++ = '\x87'; /* TUPLE3 */
        *q++ = 'R';     /* REDUCE */
    }
    PyErr_Clear();
    Py_XDECREF(module);
    Py_XDECREF(name);
    Py_DECREF(r);
    return q;
}

static char *pickle_items(char *p, char *end, PyObject *const *items, Py_ssize_t n, int depth, int *count);

/* A plain C-contiguous array as _rebuild_array(bytearray(data), dtype.str, shape): STACK_GLOBAL,
 * BYTEARRAY8, the dtype's str, the shape's tuple, TUPLE3, REDUCE. At `p` with room to `end`:
 * the end of what was written, or NULL (no room, or more than 4 dimensions). */
static char *pickle_array(char *p, char *end, PyArrayObject *a, int *count) {
    Py_ssize_t nbytes = PyArray_NBYTES(a);
    int nd = PyArray_NDIM(a);
    if (nd > SIMPLE_DEPTH_MAX || end - p < nbytes + 64 + 10 * nd) return NULL;
    char code[24];
    int clen = dtype_code(code, PyArray_DESCR(a), (long long)PyArray_ITEMSIZE(a));
    *p++ = '\x8c';
    *p++ = (char)(sizeof ARRAY_MODULE - 1);
    memcpy(p, ARRAY_MODULE, sizeof ARRAY_MODULE - 1);
    p += sizeof ARRAY_MODULE - 1;
    *p++ = '\x8c';
    *p++ = (char)(sizeof ARRAY_NAME - 1);
    memcpy(p, ARRAY_NAME, sizeof ARRAY_NAME - 1);
    p += sizeof ARRAY_NAME - 1;
    *p++ = '\x93'; /* STACK_GLOBAL */
    *p++ = '\x96'; /* BYTEARRAY8: 8 bytes of length, little-endian, then the bytes */
    for (int k = 0; k < 8; k++) *p++ = (char)((uint64_t)nbytes >> (8 * k));
    memcpy(p, PyArray_DATA(a), (size_t)nbytes);
    p += nbytes;
    *p++ = '\x8c';
    *p++ = (char)clen;
    memcpy(p, code, (size_t)clen);
    p += clen;
    if (nd > 3) *p++ = '(';
    for (int i = 0; i < nd; i++) p = pickle_int(p, (long long)PyArray_DIMS(a)[i]);
    *p++ = nd == 0 ? ')' : nd <= 3 ? (char)(0x84 + nd) : 't';
    *p++ = '\x87'; /* TUPLE3 */
    *p++ = 'R';     /* REDUCE */
    *count += 4 + nd;
    return *count > SIMPLE_ITEMS_MAX ? NULL : p;
}

/* One value at `p` (room to `end`), `depth` tuples down, `*count` values written so far:
 * the end of what was written, or NULL (not a simple value, or no room). */
static char *pickle_one(char *p, char *end, PyObject *o, int depth, int *count) {
    if (end - p < 10 || ++*count > SIMPLE_ITEMS_MAX) return NULL;
    if (o == Py_None) *p++ = 'N';
    else if (o == Py_True) *p++ = '\x88'; /* NEWTRUE */
    else if (o == Py_False) *p++ = '\x89'; /* NEWFALSE */
    else if (PyFloat_CheckExact(o)) {
        *p++ = 'G'; /* BINFLOAT: 8 bytes, big-endian */
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(o), p, 0) < 0) { PyErr_Clear(); return NULL; }
        p += 8;
    } else if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return NULL; }
        p = pickle_int(p, v);
    } else if (PyUnicode_CheckExact(o)) {
        p = pickle_str(p, end, o);
    } else if (PyTuple_CheckExact(o) && depth < SIMPLE_DEPTH_MAX) {
        p = pickle_items(p, end, &PyTuple_GET_ITEM(o, 0), PyTuple_GET_SIZE(o), depth + 1, count);
    } else if (plain_array(o)) {
        p = pickle_array(p, end, (PyArrayObject *)o, count);
    } else if (active && Py_IS_TYPE(o, (PyTypeObject *)active->future_cls) && future_pending(active, o) == 1) {
        p = pickle_future(p, end, o);
    } else {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

/* The tuple of `items` as pickle writes it: EMPTY_TUPLE, the items then TUPLE1-3, or MARK,
 * the items, TUPLE. The end of what was written, or NULL. */
static char *pickle_items(char *p, char *end, PyObject *const *items, Py_ssize_t n, int depth, int *count) {
    if (end - p < 2) return NULL;
    if (n > 3) *p++ = '('; /* MARK */
    for (Py_ssize_t i = 0; p && i < n; i++) p = pickle_one(p, end, items[i], depth, count);
    if (!p || end - p < 1) return NULL;
    if (n == 0) *p++ = ')'; /* EMPTY_TUPLE */
    else if (n <= 3) *p++ = (char)(0x84 + n); /* TUPLE1, TUPLE2, TUPLE3 */
    else *p++ = 't'; /* TUPLE */
    return p;
}

/* The tuple `args` as pickle.loads reads it (protocol 5, the opcodes pickle.dumps uses),
 * written here when every item is None, a bool, a float, an int of 64 bits, a str of at
 * most 255 bytes, a pending future or a tuple of them (at most 64 values, tuples 4 deep):
 * the arguments of most calls that carry no arrays (a reduction's target among them), and
 * the values of most reductions, go out without the Python encoder. Its length, or 0 if
 * an item is of another kind. */
Py_ssize_t pickle_simple(char *out, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > MAX_ARGS) return 0;
    char *p = out, *end = out + SIMPLE_PICKLE_MAX - 1;
    int count = 0;
    *p++ = '\x80'; /* PROTO 5 */
    *p++ = 5;
    p = pickle_items(p, end, args, nargs, 0, &count);
    if (!p) return 0;
    *p++ = '.'; /* STOP */
    return p - out;
}

/* The array that _rebuild_array(data, code, shape) makes, built here: a fresh, writable
 * copy (a new reference); NULL with no error if the parts are not what pickle_array
 * writes, or NumPy is not loaded (pickle.loads then makes it). */
static PyObject *rebuild_array(PyObject *args) {
    static PyObject *last_code; /* the dtype of the last array read, and its code: most repeat */
    static PyArray_Descr *last_descr;
    if (!numpy_api_ready() || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != 3) return NULL;
    PyObject *data = PyTuple_GET_ITEM(args, 0), *code = PyTuple_GET_ITEM(args, 1), *shape = PyTuple_GET_ITEM(args, 2);
    Py_ssize_t nd = PyTuple_CheckExact(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (!PyBytes_CheckExact(data) || !PyUnicode_CheckExact(code) || nd < 0 || nd > SIMPLE_DEPTH_MAX) return NULL;
    npy_intp dims[SIMPLE_DEPTH_MAX];
    for (Py_ssize_t i = 0; i < nd; i++) {
        dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (dims[i] < 0) { PyErr_Clear(); return NULL; }
    }
    if (!last_code || PyUnicode_Compare(code, last_code) != 0) {
        PyArray_Descr *d = NULL;
        if (PyErr_Occurred() || !PyArray_DescrConverter(code, &d)) { PyErr_Clear(); return NULL; }
        Py_XSETREF(last_descr, d);
        Py_XSETREF(last_code, Py_NewRef(code));
    }
    Py_INCREF(last_descr); /* (stolen by the array) */
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, last_descr, (int)nd, dims, NULL, NULL, 0, NULL);
    if (!a) return NULL;
    if (PyArray_NBYTES((PyArrayObject *)a) != PyBytes_GET_SIZE(data)) { Py_DECREF(a); return NULL; }
    memcpy(PyArray_DATA((PyArrayObject *)a), PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data));
    return a;
}

/* The tuple that the `n` bytes at `s` pickle, if pickle_simple wrote them (those opcodes
 * only, and nothing after STOP): a new reference; NULL with no error for any other
 * stream (pickle.loads reads it); NULL with an error if memory ran out. Reading these
 * directly skips making an Unpickler for each message of simple arguments. */
PyObject *unpickle_simple(const char *s, Py_ssize_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    if (n < 4 || p[0] != 0x80 || p[1] != 5) return NULL;
    p += 2;
    PyObject *stack[SIMPLE_ITEMS_MAX];
    Py_ssize_t count = 0, marks[SIMPLE_DEPTH_MAX + 1];
    int nmarks = 0, arrays = 0; /* arrays: _rebuild_array found (Py_Ellipsis stands for it), not yet called */
    while (p < end) {
        unsigned char op = *p++;
        PyObject *item = NULL;
        Py_ssize_t base = nmarks ? marks[nmarks - 1] : 0, take = -1;
        if (op == 'N') item = Py_NewRef(Py_None);
        else if (op == 0x88) item = Py_NewRef(Py_True);
        else if (op == 0x89) item = Py_NewRef(Py_False);
        else if (op == 'G' && end - p >= 8) {
            double v = PyFloat_Unpack8((const char *)p, 0);
            if (v == -1.0 && PyErr_Occurred()) goto fail;
            item = PyFloat_FromDouble(v);
            p += 8;
        } else if (op == 'J' && end - p >= 4) {
            uint32_t w = 0;
            for (int k = 0; k < 4; k++) w |= (uint32_t)p[k] << (8 * k);
            item = PyLong_FromLong((long)(int32_t)w);
            p += 4;
        } else if (op == 0x8a && end - p >= 9 && p[0] == 8) {
            uint64_t w = 0;
            for (int k = 0; k < 8; k++) w |= (uint64_t)p[1 + k] << (8 * k);
            item = PyLong_FromLongLong((long long)(int64_t)w);
            p += 9;
        } else if (op == 0x8c && end - p >= 1 && end - p - 1 >= p[0]) { /* SHORT_BINUNICODE */
            item = PyUnicode_DecodeUTF8((const char *)p + 1, p[0], "strict");
            p += 1 + p[0];
        } else if (op == 0x93 && count - base >= 2 && PyUnicode_CheckExact(stack[count - 2]) && PyUnicode_CheckExact(stack[count - 1]) &&
                   PyUnicode_CompareWithASCIIString(stack[count - 2], ARRAY_MODULE) == 0 &&
                   PyUnicode_CompareWithASCIIString(stack[count - 1], ARRAY_NAME) == 0) { /* STACK_GLOBAL */
            Py_DECREF(stack[--count]);
            Py_DECREF(stack[--count]);
            item = Py_NewRef(Py_Ellipsis);
            arrays++;
        } else if (op == 0x96 && end - p >= 8 && count > base && stack[count - 1] == Py_Ellipsis) { /* BYTEARRAY8 */
            uint64_t len = 0;
            for (int k = 0; k < 8; k++) len |= (uint64_t)p[k] << (8 * k);
            p += 8;
            if (len > (uint64_t)(end - p)) goto fail;
            item = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)len);
            p += len;
        } else if (op == 'R' && count - base >= 2 && stack[count - 2] == Py_Ellipsis) { /* REDUCE */
            item = rebuild_array(stack[count - 1]);
            if (!item) goto fail;
            Py_DECREF(stack[--count]);
            Py_DECREF(stack[--count]);
            arrays--;
        } else if (op == '(' && nmarks < SIMPLE_DEPTH_MAX + 1) {
            marks[nmarks++] = count;
            continue;
        } else if (op == ')') {
            item = PyTuple_New(0);
        } else if (op >= 0x85 && op <= 0x87 && count - base >= op - 0x84) {
            take = op - 0x84; /* TUPLE1-3: the last 1-3 values */
        } else if (op == 't' && nmarks && count - base > 3) {
            take = count - base; /* TUPLE: the values since the MARK */
            nmarks--;
        } else if (op == '.' && p == end && count == 1 && nmarks == 0 && arrays == 0 && PyTuple_CheckExact(stack[0])) {
            return stack[0];
        } else {
            goto fail;
        }
        if (take >= 0) {
            if (!(item = PyTuple_New(take))) goto fail;
            count -= take;
            for (Py_ssize_t i = 0; i < take; i++) PyTuple_SET_ITEM(item, i, stack[count + i]);
        }
        if (!item) goto fail;
        if (count == SIMPLE_ITEMS_MAX) { Py_DECREF(item); goto fail; }
        stack[count++] = item;
    }
fail:
    for (Py_ssize_t i = 0; i < count; i++) Py_DECREF(stack[i]);
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_MemoryError)) PyErr_Clear();
    return NULL;
}

/* unpickle_simple(data) -> tuple or None: unpickle_simple's tuple, or None for a stream
 * pickle_simple did not write. */
PyObject *Core_unpickle_simple(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    if (nargs != 1 || PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "unpickle_simple(data)");
        return NULL;
    }
    PyObject *t = unpickle_simple(view.buf, view.len);
    PyBuffer_Release(&view);
    if (!t && !PyErr_Occurred()) Py_RETURN_NONE;
    return t;
}

/* pickle_simple(args) -> bytes or None: the tuple `args` pickled as above, or None when
 * an item is of another kind (message.encode_call then pickles it in Python). The same
 * values pickle.dumps(args, 5) loads back to. */
PyObject *Core_pickle_simple(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 || !PyTuple_CheckExact(args[0])) { PyErr_SetString(PyExc_TypeError, "pickle_simple(tuple)"); return NULL; }
    PyObject *t = args[0];
    char out[SIMPLE_PICKLE_MAX];
    Py_ssize_t len = pickle_simple(out, &PyTuple_GET_ITEM(t, 0), PyTuple_GET_SIZE(t));
    if (len <= 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(out, len);
}
