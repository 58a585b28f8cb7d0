/*
 * Error translation: the core below the Python layer reports failures as
 * an nt_error (status, message, signature column); this file turns one
 * into the matching Python exception. Messages are built where the
 * failure is detected; only the exception class is chosen here.
 *
 * Place in the pipeline: python, the boundary: every stage's nt_error becomes
 * an exception here.
 */
#include "python/pyapi.h"

#include <stdarg.h>
#include <string.h>

void nt_raise(const nt_error *err)
{
    PyObject *exc;
    switch (err->status) {
    case NT_ERR_TYPE: exc = PyExc_TypeError; break;
    case NT_ERR_OVERFLOW: exc = PyExc_OverflowError; break;
    case NT_ERR_MEMORY: exc = PyExc_MemoryError; break;
    case NT_ERR_OS: exc = PyExc_OSError; break;
    case NT_ERR_UNSUPPORTED: exc = PyExc_NotImplementedError; break;
    default: exc = PyExc_ValueError; break;
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

/* Whether the exception now set must reach the caller as it is rather than
   become a message naming the parameter: whatever is no Exception
   (KeyboardInterrupt, SystemExit, GeneratorExit), and MemoryError and
   RecursionError, which say nothing about the value that was converted. A
   Ctrl-C during a slow __index__ stays a KeyboardInterrupt. */
int nt_error_passes(void)
{
    PyObject *type = PyErr_Occurred();
    return type != NULL
        && (!PyErr_GivenExceptionMatches(type, PyExc_Exception)
            || PyErr_GivenExceptionMatches(type, PyExc_MemoryError)
            || PyErr_GivenExceptionMatches(type, PyExc_RecursionError));
}

void nt_error_save(nt_saved_error *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    saved->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&saved->type, &saved->exc, &saved->tb);
#endif
}

void nt_error_restore(nt_saved_error *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(saved->exc);
#else
    PyErr_Restore(saved->type, saved->exc, saved->tb);
#endif
}

/* Raises `exc` with a message, its __cause__ the exception now set: what a
   value's own __index__ or __float__ raised stays visible instead of being
   replaced by the message naming the parameter. The message ends with the
   cause's type and text (a log that keeps only str(exc) still says why).
   An exception that passes (nt_error_passes) is left as it is. Called with
   an exception set: the cause is never NULL. */
void nt_raise_chained(PyObject *exc, const char *fmt, ...)
{
    if (nt_error_passes())
        return;
    PyObject *type, *cause, *tb;
    PyErr_Fetch(&type, &cause, &tb);
    PyErr_NormalizeException(&type, &cause, &tb);
    if (tb != NULL) /* (never without a cause) */
        PyException_SetTraceback(cause, tb);
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL) { /* no memory: that error is raised instead */
        Py_XDECREF(type);
        Py_DECREF(cause);
        Py_XDECREF(tb);
        return;
    }
    /* the cause's text, where there is memory for it */
    PyObject *text = PyObject_Str(cause);
    PyObject *full = text == NULL ? NULL
        : PyUnicode_GetLength(text) > 0
        ? PyUnicode_FromFormat("%U: %.100s: %.300U", msg, Py_TYPE(cause)->tp_name, text)
        : PyUnicode_FromFormat("%U: %.100s", msg, Py_TYPE(cause)->tp_name);
    Py_XDECREF(text);
    if (full != NULL)
        Py_SETREF(msg, full);
    else
        PyErr_Clear();
    PyErr_SetObject(exc, msg);
    Py_DECREF(msg);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2); /* an instance: exc's, or a MemoryError */
    PyException_SetCause(v2, Py_NewRef(cause));
    PyException_SetContext(v2, Py_NewRef(cause));
    PyErr_Restore(t2, v2, tb2);
    Py_XDECREF(type);
    Py_DECREF(cause);
    Py_XDECREF(tb);
}
