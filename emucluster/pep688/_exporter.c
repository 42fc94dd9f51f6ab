/* emucluster.pep688._exporter: PEP 688's buffer export for Python 3.11, for classes deriving
 * from `Exporter`.
 *
 * Python 3.12 fills a class's buffer slot from its `__buffer__` method (PEP 688); Python 3.11
 * only asks the C slot of the type (tp_as_buffer), so `memoryview(obj)` of a Python class
 * fails there whatever it defines. `Exporter` is an empty base type (no fields, so it mixes
 * with any slotted class) whose bf_getbuffer calls the instance's `__buffer__(flags)`, checks
 * that it returned a memoryview, and hands the consumer that memoryview's buffer
 * (PyObject_GetBuffer on it): the consumer's PyBuffer_Release goes to that memoryview, which
 * ends the export when the last consumer lets go. An exception in `__buffer__` is the
 * consumer's exception. Unlike 3.12, `__release_buffer__` is not called (the memoryview's own
 * release ends the export), and the consumer's `view.obj` is the memoryview `__buffer__`
 * returned, not the instance. No maintained library offers this backport (package docs,
 * public code and the package index's names searched). The package's __init__ chooses this
 * base only on Python < 3.12 and only if this module was built (setup.py; a pure-Python
 * install has no buffer export on 3.11).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int
exporter_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PyObject *method = PyObject_GetAttrString(self, "__buffer__");
    if (method == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "a bytes-like object is required, not '%.200s' "
                         "(it defines no __buffer__)", Py_TYPE(self)->tp_name);
        }
        return -1;
    }
    PyObject *result = PyObject_CallFunction(method, "i", flags);
    Py_DECREF(method);
    if (result == NULL) {
        return -1;
    }
    if (!PyMemoryView_Check(result)) {
        PyErr_Format(PyExc_TypeError, "__buffer__ returned non-memoryview object (type %.200s)",
                     Py_TYPE(result)->tp_name);
        Py_DECREF(result);
        return -1;
    }
    int status = PyObject_GetBuffer(result, view, flags); /* view->obj holds the memoryview */
    Py_DECREF(result);
    return status;
}

static PyType_Slot exporter_slots[] = {
    {Py_bf_getbuffer, exporter_getbuffer},
    {Py_tp_doc, "A base whose instances export the buffer their __buffer__(flags) returns "
                "(PEP 688 on Python 3.11)."},
    {0, NULL},
};

static PyType_Spec exporter_spec = {
    .name = "emucluster.pep688._exporter.Exporter",
    .basicsize = 0, /* object's: no fields, so any slotted class may derive from it too */
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = exporter_slots,
};

static int
exporter_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &exporter_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int status = PyModule_AddObjectRef(module, "Exporter", type);
    Py_DECREF(type);
    return status;
}

static PyModuleDef_Slot exporter_module_slots[] = {
    {Py_mod_exec, exporter_exec},
    {0, NULL},
};

static struct PyModuleDef exporter_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "emucluster.pep688._exporter",
    .m_doc = "PEP 688's buffer export for Python 3.11: the base type Exporter.",
    .m_size = 0,
    .m_slots = exporter_module_slots,
};

PyMODINIT_FUNC
PyInit__exporter(void)
{
    return PyModuleDef_Init(&exporter_module);
}
