/* The contract's tables (contract.h), filled once from the Python half
 * (shoal/_runtime/core_contract.py): the only place the core finds a slot or interns a name. */
#include "contract.h"

#include <structmember.h>

Slots shoal_slots;
Names shoal_names;
int shoal_contract_ready = 0;

#define SLOT_COUNT (sizeof(Slots) / sizeof(Py_ssize_t))
#define NAME_COUNT (sizeof(Names) / sizeof(PyObject *))

/* The offset of slot `name` of class `cls` (a __slots__ member descriptor), or -1 with an error. */
static Py_ssize_t slot_offset(PyObject *cls, PyObject *name) {
    PyObject *d = PyObject_GetAttr(cls, name);
    if (!d) return -1;
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) off = ((PyMemberDescrObject *)d)->d_member->offset;
    else PyErr_Format(PyExc_TypeError, "the compiled core's contract: %R.%U is not a __slots__ member", cls, name);
    Py_DECREF(d);
    return off;
}

/* configure_contract(slots, names): slots, ((class, attribute), ...) in the order of
 * contract.h's Slots; names, (attribute, ...) in the order of its Names. */
static PyObject *configure_contract(PyObject *unused, PyObject *args) {
    PyObject *slots, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &slots, &PyTuple_Type, &names)) return NULL;
    if ((size_t)PyTuple_GET_SIZE(slots) != SLOT_COUNT || (size_t)PyTuple_GET_SIZE(names) != NAME_COUNT)
        return PyErr_Format(PyExc_ValueError, "the compiled core's contract has %zu slots and %zu names; given %zd and %zd "
                            "(core_contract.py and contract.h disagree)", SLOT_COUNT, NAME_COUNT,
                            PyTuple_GET_SIZE(slots), PyTuple_GET_SIZE(names));
    Py_ssize_t offsets[SLOT_COUNT];
    for (Py_ssize_t i = 0; i < (Py_ssize_t)SLOT_COUNT; i++) {
        PyObject *pair = PyTuple_GET_ITEM(slots, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyType_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 1)))
            return PyErr_Format(PyExc_TypeError, "contract slot %zd must be (class, attribute name), not %R", i, pair);
        if ((offsets[i] = slot_offset(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1))) < 0) return NULL;
    }
    PyObject *interned[NAME_COUNT];
    for (Py_ssize_t i = 0; i < (Py_ssize_t)NAME_COUNT; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name)) {
            for (Py_ssize_t j = 0; j < i; j++) Py_DECREF(interned[j]);
            return PyErr_Format(PyExc_TypeError, "contract name %zd must be a str, not %R", i, name);
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        interned[i] = name;
    }
    memcpy(&shoal_slots, offsets, sizeof offsets);
    PyObject **table = (PyObject **)&shoal_names;
    for (size_t i = 0; i < NAME_COUNT; i++) Py_XSETREF(table[i], interned[i]);
    shoal_contract_ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef contract_functions[] = {
    {"configure_contract", configure_contract, METH_VARARGS,
     "configure_contract(slots, names): the slots and names of contract.h, from shoal/_runtime/core_contract.py"},
    {NULL}
};

int contract_init(PyObject *module) {
    _Static_assert(sizeof(Slots) % sizeof(Py_ssize_t) == 0, "Slots holds offsets only");
    _Static_assert(sizeof(Names) % sizeof(PyObject *) == 0, "Names holds names only");
    return PyModule_AddFunctions(module, contract_functions);
}
