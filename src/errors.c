/*
 * Error translation: the core below the Python layer reports failures as
 * an nt_error (status, message, signature column); this file turns one
 * into the matching Python exception. Messages are built where the
 * failure is detected; only the exception class is chosen here.
 */
#include "pyapi.h"

#include <string.h>

void nt_raise(const nt_error *err)
{
    PyObject *exc;
    switch (err->status) {
    case NT_ERR_TYPE:        exc = PyExc_TypeError; break;
    case NT_ERR_OVERFLOW:    exc = PyExc_OverflowError; break;
    case NT_ERR_MEMORY:      exc = PyExc_MemoryError; break;
    case NT_ERR_OS:          exc = PyExc_OSError; break;
    case NT_ERR_UNSUPPORTED: exc = PyExc_NotImplementedError; break;
    default:                 exc = PyExc_ValueError; break;
    }
    PyErr_SetString(exc, err->msg);
}

void nt_raise_parse_error(const char *src, const nt_error *err)
{
    if (err->status != NT_ERR_VALUE || err->column < 0) {
        nt_raise(err);
        return;
    }
    int col = err->column;
    int len = (int)strlen(src);
    if (col > len)
        col = len;
    char *pad = PyMem_Malloc((size_t)col + 1);
    if (pad == NULL) {
        PyErr_NoMemory();
        return;
    }
    memset(pad, ' ', (size_t)col);
    pad[col] = '\0';
    PyErr_Format(PyExc_ValueError, "%s\n    %s\n    %s^", err->msg, src, pad);
    PyMem_Free(pad);
}
