/* The Partials of the compiled contributions: what contribute.c (the elements' side)
 * and partials.c (one PE's part of each reduction, its children and its tree) share.
 * Private to those two files. */
#ifndef SHOAL_PARTIALS_H
#define SHOAL_PARTIALS_H
#include "core.h"

#define CHECKED 4 /* contributions of one call remembered to refuse a second one */
/* TO_FUTURE (core.h): the entry field of a compact REDUCE carrying a child's partial of a
 * reduction to a future is TO_FUTURE + the reducer's number; its value (owner, fid, partial).
 * TO_ENTRY: of a reduction to an entry method of an element of the collection; its value
 * (index, name, args, partial) */

/* One PE's contributions to one reduction of one collection. */
typedef struct Partial {
    struct Partial *next;
    uint64_t coll;
    uint32_t seq;
    int rid;                   /* the built-in reducer's number */
    PyObject *reducer;
    PyObject *given, *target;  /* the target as the first element gave it, and as Python keeps it */
    PyObject *first_value;     /* nop: the one value that stands if it is the only one */
    PyObject *values;          /* others: a list, in arrival order */
    long *numbers;             /* the elements' row-major numbers, in arrival order */
    Py_ssize_t got, expected, capacity;
    long min_number;
    int in_order;              /* numbers arrived increasing */
    int whole;                 /* the PE's whole part (a future's): its children's partials too */
    long parent;               /* whole: the parent PE in the collection's tree, -1 at its root */
    PyObject *kids;            /* whole: [(child PE, its partial)], in arrival order */
    PyObject *packed;          /* whole, to an element's entry method: (index, name, args) as it travels */
} Partial;

struct Contributions {
    PyObject *manager;         /* the ReductionManager: holds, add_own and its errors */
    PyObject *handle;          /* futures.future_handle(owner, fid): a child's target, as Python keeps it */
    PyObject *check_target;    /* reductions._check_target(target) -> what Python keeps */
    PyObject *entry_ref;       /* proxy.EntryRef: a target kept as it is */
    PyObject *context;         /* the context module's namespace (_current) */
    PyObject *chare_cls;       /* Chare: a contributor must be one (its slots are read) */
    PyObject *pack_entry;      /* manager.pack_entry(coll, target) -> (index, name, args), or None */
    PyObject *unpack_entry;    /* manager.unpack_entry(coll, packed) -> the EntryRef */
    Partial *list, *last;      /* `last`: the Partial used last (one reduction at a time, mostly) */
    /* the contributions of the call running now, to refuse a second one to the same reduction */
    PyObject *call_el;         /* borrowed: compared, never used */
    long long call_calls, call_received;
    struct { uint64_t coll; int rid; PyObject *target; } checked[CHECKED];
    int nchecked;
};

/* partials.c */
void partial_free(Partial *p);
/* Forget the contributions of the call that ran last (a new one runs, or the core goes). */
void forget_checked(Contributions *k);
/* The Partial of reduction `seq` of `coll` here, or NULL. */
Partial *partial_find(Contributions *k, uint64_t coll, uint32_t seq);
Partial *partial_new(Contributions *k, uint64_t coll, uint32_t seq, int rid, PyObject *reducer,
                     PyObject *given, PyObject *kept, Py_ssize_t count, int whole, PyObject *span,
                     PyObject *packed);
/* Whether a Partial to `target` may hold this PE's whole part: a future's, or an element's
 * entry method of collection `coll` (then `*packed`: how it travels, a new reference).
 * 1, 0, or -1 with an error. */
int whole_target(Contributions *k, uint64_t coll, PyObject *target, PyObject **packed);
/* The same for entry method `name` of the element of `proxy` (a compiled bound entry's
 * parts), without a call into Python. */
int whole_element_entry(PyObject *proxy, PyObject *name, uint64_t coll, PyObject **packed);
int partial_check(Contributions *k, Partial *p, PyObject *target, PyObject *reducer);
int partial_keep(Partial *p, PyObject *value, long number);
/* `p` is complete (`delivered`: by a message the core received): its value goes on. 0 or -1; `p` is freed. */
int partial_complete(Core *c, Contributions *k, Partial *p, int delivered);
int same_target(PyObject *a, PyObject *b);
int is_future(PyObject *o);
PyObject *gathering_state(Core *c, PyObject *id, int *group);
PyObject *manager_call(Contributions *k, PyObject *name, const char *format, ...);
void manager_raise(PyObject *exc);
int manager_holds(Contributions *k, uint64_t coll, uint32_t seq);


/* results.c */
/* The combined `value` of complete Partial `p` goes on: up the tree to the parent, or at
 * the root to its future or its entry method (run here at once when `delivered` allows).
 * 0 or -1. */
int partial_result(Core *c, Partial *p, PyObject *value, int delivered);

#endif
