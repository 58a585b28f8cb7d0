/*
 * Typed descriptors: any object with the buffer protocol (ndarray,
 * memoryview, bytearray, array.array, ...) becomes a held Py_buffer plus an
 * element kind decoded from its PEP 3118 format.
 *
 * Format rules (PEP 3118, struct module): with no prefix or '@' sizes are
 * native, so on LP64 'l' and 'q' are both 8 bytes; under '=', '<', '>' and
 * '!' sizes are standard ('l' is 4 bytes). Byte order other than the host's
 * is refused: a swapped int read as native is a silently wrong value.
 *
 * Place in the pipeline: convert, after the plan: a buffer bound to a pointer
 * or a typed memoryview is held here, and its element kind read from its
 * format, for convert/value.c to check.
 */
#include "python/pyapi.h"

#include <stdlib.h>
#include <string.h>

nt_held *nt_held_get(PyObject *obj, const char *what)
{
    nt_held *h = PyMem_Calloc(1, sizeof(*h));
    if (h == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    /* PyBUF_FULL_RO: strides, format, and suboffsets if the exporter has
       them (refused below: an indirect buffer has no single data pointer). */
    if (PyObject_GetBuffer(obj, &h->view, PyBUF_FULL_RO) < 0) {
        PyMem_Free(h);
        nt_raise_chained(PyExc_TypeError,
                         "%s: %.200s object does not support the buffer protocol "
                         "(or cannot export a strided buffer)",
                         what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (nt_view_check(obj, &h->view, what) < 0) {
        nt_held_release(h);
        return NULL;
    }
    return h;
}

/* What the exporter says of the layout, checked before anything reads it:
   asked for PyBUF_FULL_RO, it gives a shape (unless 0-dimensional), no
   negative count, no indirection (suboffsets: no single data pointer), and
   len is itemsize times the elements, as PEP 3118 says. An exporter that
   ignores the request, or describes memory it does not have, is refused
   here rather than read past its end. */
int nt_view_check(PyObject *obj, const Py_buffer *v, const char *what)
{
    const char *type = Py_TYPE(obj)->tp_name;
    if (v->ndim < 0 || v->itemsize < 0 || v->len < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the %.200s buffer has a negative ndim, itemsize or length "
                     "(%d, %zd, %zd)",
                     what, type, v->ndim, v->itemsize, v->len);
        return -1;
    }
    if (v->ndim > 0 && v->shape == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the %.200s buffer is %d-dimensional but has no shape (numthunk "
                     "asks for its shape, strides and format: PyBUF_FULL_RO)",
                     what, type, v->ndim);
        return -1;
    }
    if (v->suboffsets != NULL)
        for (int d = 0; d < v->ndim; d++)
            if (v->suboffsets[d] >= 0) {
                PyErr_Format(PyExc_TypeError,
                             "%s: indirect buffers (PIL-style suboffsets) are not supported", what);
                return -1;
            }
    /* itemsize x the extents; a product past PY_SSIZE_T_MAX is no length
       of memory (unless an extent is 0) */
    int empty = 0, over = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] < 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: the %.200s buffer has a negative extent %zd on axis %d", what, type,
                         v->shape[d], d);
            return -1;
        }
        empty |= v->shape[d] == 0;
    }
    Py_ssize_t bytes = empty ? 0 : v->itemsize;
    for (int d = 0; d < v->ndim && !empty && !over; d++) {
        if (bytes > PY_SSIZE_T_MAX / v->shape[d])
            over = 1;
        else
            bytes *= v->shape[d];
    }
    if (over || bytes != v->len) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the %.200s buffer says it is %zd bytes long, but its shape and "
                     "itemsize (%zd bytes) make %s%zd",
                     what, type, v->len, v->itemsize, over ? "more than " : "",
                     over ? PY_SSIZE_T_MAX : bytes);
        return -1;
    }
    return 0;
}

/* Releasing may run the exporter's code (a DLPack deleter, a Python
   __release_buffer__): an exception set meanwhile (the refusal being
   reported) is put aside while it runs. */
void nt_held_release(nt_held *h)
{
    if (h == NULL)
        return;
    nt_saved_error saved;
    nt_error_save(&saved);
    while (h != NULL) {
        nt_held *next = h->next;
        PyBuffer_Release(&h->view);
        PyMem_Free(h);
        h = next;
    }
    nt_error_restore(&saved);
}

static int host_is_little(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* The kind table says which codes name which kind, with native and with
   standard sizes (kinds.c). */
int nt_elem_decode(const Py_buffer *view, nt_elem *out, const char *what)
{
    const char *f = view->format != NULL ? view->format : "B";
    out->format = f;
    out->kind = NT_VOID;
    char order = '@';
    if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!')
        order = *f++;
    int is_complex = 0;
    if (*f == 'Z') {
        is_complex = 1;
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0')
        return 0; /* struct, sub-array or unknown: no kind */
    int standard = order != '@';
    /* ctypes exports c_long arrays as '<l' with the native 8-byte itemsize:
       believe the itemsize where the code is 'l' or 'L'. */
    if (standard && (*f == 'l' || *f == 'L') && view->itemsize == (Py_ssize_t)sizeof(long))
        standard = 0;
    int kind = nt_kind_of_format(*f, standard, is_complex);
    if (kind == NT_VOID || (Py_ssize_t)nt_kinds[kind].size != view->itemsize)
        return 0;
    int swapped =
        (order == '<' && !host_is_little()) || ((order == '>' || order == '!') && host_is_little());
    if (swapped && view->itemsize > 1) {
        PyErr_Format(PyExc_TypeError,
                     "%s: the buffer is in non-native byte order (format '%s'); "
                     "convert it first, e.g. arr.astype(arr.dtype.newbyteorder('='))",
                     what, view->format);
        return -1;
    }
    out->kind = kind;
    return 0;
}

/* A byte-order character holds until the next one (NumPy writes '>' once
   before the first of a run of big-endian fields), inside nested structs
   too; field names stand between colons. Codes of one byte read the same
   in either order. */
int nt_struct_check_order(const Py_buffer *view, const char *what)
{
    const char *f = view->format != NULL ? view->format : "B";
    int swapped = 0;
    for (const char *c = f; *c != '\0'; c++) {
        if (*c == ':') { /* a field name: to its closing colon */
            const char *end = strchr(c + 1, ':');
            if (end == NULL)
                break;
            c = end;
        } else if (*c == '@' || *c == '=' || *c == '^')
            swapped = 0;
        else if (*c == '<' || *c == '>' || *c == '!')
            swapped = (*c == '<') != host_is_little();
        else if (swapped && strchr("cbB?spx", *c) == NULL
                 && ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) && *c != 'T'
                 && *c != 'Z') {
            const char *name = c[1] == ':' ? c + 2 : NULL;
            const char *end = name != NULL ? strchr(name, ':') : NULL;
            char field[128];
            if (end != NULL) {
                size_t n = (size_t)(end - name) < sizeof(field) - 1 ? (size_t)(end - name)
                                                                    : sizeof(field) - 1;
                memcpy(field, name, n);
                field[n] = '\0';
                PyErr_Format(PyExc_TypeError,
                             "%s: the struct's field '%s' is in non-native byte order "
                             "(format '%s'); convert the array first, e.g. "
                             "arr.astype(arr.dtype.newbyteorder('='))",
                             what, field, f);
            } else
                PyErr_Format(PyExc_TypeError,
                             "%s: a field of the struct is in non-native byte order "
                             "(format '%s'); convert the array first, e.g. "
                             "arr.astype(arr.dtype.newbyteorder('='))",
                             what, f);
            return -1;
        }
    }
    return 0;
}

/* A field name (":name:") at c, or NULL: its text, *len bytes long. */
static const char *field_name(const char *c, size_t *len)
{
    const char *end = c[0] == ':' ? strchr(c + 1, ':') : NULL;
    if (end == NULL)
        return NULL;
    *len = (size_t)(end - c - 1);
    return c + 1;
}

/* name (len bytes) before the path that starts at *at, in buf, with a '.'
   between; 0 when it does not fit, the path then cut: "..." before it.
   Three bytes are kept for that. */
static int prepend(char *buf, char **at, const char *name, size_t len)
{
    int dot = **at != '\0';
    if ((size_t)(*at - buf) < len + dot + 3) {
        *at -= 3;
        memcpy(*at, "...", 3);
        return 0;
    }
    *at -= dot;
    if (dot)
        **at = '.';
    *at -= len;
    memcpy(*at, name, len);
    return 1;
}

/* The path of a field whose code ends just before c, at the depth-th
   nested struct ('s.o'): the name that follows the code, then the name
   that follows each '}' closing a struct around it. NULL if the field
   itself has no name. */
static const char *field_path(const char *c, int depth, char *buf, size_t n)
{
    char *at = buf + n - 1;
    *at = '\0';
    size_t len;
    const char *name = field_name(c, &len);
    if (name == NULL)
        return NULL;
    int inner = 0, fits = prepend(buf, &at, name, len);
    for (c = name + len + 1; *c != '\0' && depth > 0 && fits; c++) {
        if ((name = field_name(c, &len)) != NULL) {
            c = name + len; /* a field after it, of the same struct */
        } else if (*c == '{') {
            inner++;
        } else if (*c == '}' && inner > 0) {
            inner--;
        } else if (*c == '}' && --depth > 0 && (name = field_name(c + 1, &len)) != NULL) {
            fits = prepend(buf, &at, name, len); /* the struct around it, by its name */
            c = name + len;
        }
    }
    return at;
}

/* The code 'O' in a format, outside field names, at any depth (a
   struct's field, a nested struct's, a sub-array's): where it is, or NULL;
   *depth the structs around it. */
static const char *object_code(const char *f, int *depth)
{
    const char *c = f;
    size_t len;
    *depth = 0;
    for (; *c != '\0' && *c != 'O'; c++) {
        const char *name = field_name(c, &len);
        if (name != NULL)
            c = name + len;
        else if (*c == '{')
            (*depth)++;
        else if (*c == '}')
            (*depth)--;
    }
    return *c != '\0' ? c : NULL;
}

/* Python objects among the items. A kernel that writes a number there
   overwrites a reference, and what it reads is an address: neither is data
   C code can use. A memoryview cast (mv.cast("B")) exports the bytes of
   what it views under a format of its own: the format its exporter gave
   (the view's master) is checked too. */
int nt_check_plain(const Py_buffer *view, const char *what)
{
    const char *f = view->format != NULL ? view->format : "B";
    int depth;
    const char *c = object_code(f, &depth);
    if (c == NULL && view->obj != NULL && PyMemoryView_Check(view->obj)) {
        const char *master = ((PyMemoryViewObject *)view->obj)->mbuf->master.format;
        if (master != NULL && object_code(master, &depth) != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s: a memoryview cast to format '%s' from a buffer that holds Python "
                         "objects (format '%s'): C code cannot read or write them; bind an "
                         "array of plain data",
                         what, f, master);
            return -1;
        }
    }
    if (c == NULL)
        return 0;
    char buf[128];
    const char *path = depth > 0 ? field_path(c + 1, depth, buf, sizeof(buf)) : NULL;
    if (depth <= 0)
        PyErr_Format(PyExc_TypeError,
                     "%s: a buffer of Python objects (format '%s', as a NumPy array of dtype "
                     "object exports): C code cannot read or write them; bind an array of "
                     "plain data",
                     what, f);
    else if (path != NULL)
        PyErr_Format(PyExc_TypeError,
                     "%s: the struct's field '%s' holds Python objects (format '%s'): C code "
                     "cannot read or write them; bind an array of plain data",
                     what, path, f);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s: a field of the struct holds Python objects (format '%s'): C code "
                     "cannot read or write them; bind an array of plain data",
                     what, f);
    return -1;
}

/* The alignment C gives a value of a PEP 3118 code: its kind's (the kind
   table), else that of the C type the code names. Codes of no C type
   (pads, strings, a code numthunk does not know) ask for none. */
static size_t code_align(char code, int is_complex)
{
    int kind = nt_kind_of_format(code, 0, is_complex);
    if (kind != NT_VOID)
        return nt_kinds[kind].align;
    switch (code) { /* the codes of no kind */
    case 'e':
    case 'u': return _Alignof(uint16_t); /* half, UCS-2 */
    case 'w': return _Alignof(uint32_t); /* UCS-4: NumPy's unicode */
    case 'g': return _Alignof(long double);
    case 'O':
    case 'P':
    case '&':
    case 'X': return _Alignof(void *);
    default: return 1;
    }
}

/* What a struct's items need, as C lays a struct out: the alignment of
   its most aligned field, at any depth (nested structs, sub-arrays). The
   order character does not change it: ctypes writes '<' before every
   field of a struct its compiler laid out. But sizeof is a multiple of
   _Alignof, so no more than divides the item size: an item of 9 bytes
   holding a double is of a packed struct, which C reads anywhere. */
size_t nt_struct_align(const Py_buffer *view)
{
    const char *f = view->format != NULL ? view->format : "B";
    size_t align = 1, len;
    int is_complex = 0;
    for (const char *c = f; *c != '\0'; c++) {
        const char *name = field_name(c, &len);
        if (name != NULL) {
            c = name + len;
            continue;
        }
        if (*c == 'Z') {
            is_complex = 1;
            continue;
        }
        size_t a = code_align(*c, is_complex);
        if (a > align)
            align = a;
        is_complex = 0;
    }
    while (align > 1 && view->itemsize % (Py_ssize_t)align != 0)
        align /= 2;
    return align;
}

int nt_check_aligned(const Py_buffer *view, size_t align, int of_struct, const char *what)
{
    if (nt_is_aligned(view, align))
        return 0;
    /* NumPy calls a structured array aligned anywhere unless its dtype was
       made with align=True: np.require copies only those */
    PyErr_Format(PyExc_ValueError,
                 "%s: the buffer's data is not aligned to %zu bytes%s (address %p); "
                 "copy it, e.g. %s",
                 what, align, of_struct ? ", the alignment of its struct's most aligned field" : "",
                 view->buf, of_struct ? "arr.copy()" : "np.require(arr, requirements='A')");
    return -1;
}

int nt_is_pointer_buffer(const Py_buffer *v)
{
    const char *f = v->format;
    if (f == NULL || v->ndim != 0 || v->itemsize != (Py_ssize_t)sizeof(void *))
        return 0;
    if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!')
        f++;
    return *f == '&' || *f == 'P' || *f == 'z';
}

int nt_is_aligned(const Py_buffer *view, size_t align)
{
    if (align <= 1)
        return 1;
    if ((uintptr_t)view->buf % align != 0)
        return 0;
    if (view->strides != NULL)
        for (int d = 0; d < view->ndim; d++)
            if (view->shape[d] > 1 && view->strides[d] % (Py_ssize_t)align != 0)
                return 0;
    return 1;
}
