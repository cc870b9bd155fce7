/* The contract between the Python runtime and its compiled core: every slot of a runtime
 * class the core reads or writes, and every name it looks up on a runtime object.
 *
 * The Python half is shoal/_runtime/core_contract.py: its SLOTS and NAMES list the same
 * fields, in the same order, with the class and attribute each stands for, and
 * configure_contract() fills these two tables from them before the first Core is made.
 * No other C file finds a slot or interns a name; tests/native/test_core_contract.py checks that
 * the two halves agree, and that every slot named is a __slots__ member of its class.
 */
#ifndef SHOAL_CONTRACT_H
#define SHOAL_CONTRACT_H

#include <Python.h>

/* Offsets of __slots__ members (SLOT(obj, shoal_slots.x) reads one). */
typedef struct {
    Py_ssize_t proxy_info, proxy_index, proxy_dest, proxy_epoch;                  /* ElementProxy */
    Py_ssize_t section_direct, section_direct_epoch;                              /* SectionProxy */
    Py_ssize_t locations_epoch;                                                   /* Locations */
    Py_ssize_t info_id, info_root, info_shape, info_kind;                         /* CollectionInfo */
    Py_ssize_t state_info, state_elements, state_done, state_count, state_first,  /* CollectionState */
        state_span, state_hosts;
    Py_ssize_t tree_parent, tree_children;                                        /* Tree */
    Py_ssize_t channel_waiting, channel_into, channel_arrived, channel_sent,      /* Channel */
        channel_tag, channel_remote, channel_inbox, channel_ahead, channel_landed, channel_checked,
        channel_peer, channel_peer_epoch;
    Py_ssize_t future_state, future_value, future_callbacks, future_fid,          /* Future */
        future_rt, future_owner, future_origin;
    Py_ssize_t set_channels, set_buffers, set_remaining, set_item;                /* ReceiveSet */
    Py_ssize_t chare_load, chare_held, chare_collection, chare_index, chare_seq;  /* Chare */
    Py_ssize_t task_rt, task_coro, task_on_done, task_waiting, task_wake,         /* Task */
        task_wake_now, task_load, task_element;
    Py_ssize_t rt_current_element, rt_suspended;                                  /* the Runtime (RunningState) */
} Slots;

/* Interned attribute and method names, looked up on runtime objects. */
typedef struct {
    PyObject *future_table, *local, *on_value, *send_future, *replier, *pe, *ready; /* the Runtime */
    PyObject *route;                                                                /* Locations */
    PyObject *futures, *next_fid;                                                   /* its FutureTable */
    PyObject *funcs, *channels;                                                   /* a chare class, an element */
    PyObject *append, *popleft;                                                   /* deques */
    PyObject *index, *ret_adopt, *ret_gathered, *ret_unsendable, *holds_replies;  /* broadcasts, reductions */
    PyObject *waiters, *remote_waiters, *shoal_away, *combine,                    /* all-reduces */
        *finish, *wake, *resolve;
    PyObject *current;                                                            /* context: the running runtime */
    PyObject *call_slow;                                                          /* a proxy class's own call options */
    PyObject *resume_now, *add_done_callback, *refuse, *result;                  /* tasks */
    PyObject *holds, *add_own, *disagree, *twice, *send;                          /* contributions */
    PyObject *reduce, *module, *qualname;                                         /* a future, pickled */
} Names;

extern Slots shoal_slots;
extern Names shoal_names;

/* Whether configure_contract() has filled both tables. */
extern int shoal_contract_ready;


#endif
