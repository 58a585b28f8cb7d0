/*
 * numthunk._core.Thunk: a target, its bound values and the entry that
 * makes them one C function pointer. This file is the Python type: its
 * constructor's arguments, getters, methods, GC slots and __call__. What
 * they change (creation, rebind's resolve and commit, the dependency
 * graph, teardown) is life/commit.c, over the structs in life/thunk.h; see
 * docs/architecture.md for the states and who may change them.
 *
 * Calls from Python count as in flight from their `released` check to
 * their return, for the thunk called and every thunk the call reaches (its
 * dependencies at every level, thunks forwarded to it): the call frame pins
 * them. release() of any of them waits for such calls made by other
 * threads; one made from inside a call on this thread that pins it (a
 * target that calls back into Python) marks the thunk released and leaves
 * the teardown to that call's return. reclaim() with calls in flight is
 * deferred the same way. Every counter and flag here changes with the GIL held, or
 * without a GIL under the state lock (python/pyapi.h): the entry points at the
 * end of this file take it, __call__ leaves it around the target.
 *
 * The entry never needs the GIL. __call__ (from Python) releases it only
 * for targets that declare nogil.
 *
 * Place in the pipeline: python, the boundary over life: what Python calls on
 * a thunk, handed to life/commit.c and the engines.
 */
#include "life/thunk.h"
#include "life/fork.h"
#include "portable.h"

#include <stdlib.h>
#include <string.h>

/*
 * The calls this thread makes through __call__, innermost first, each with
 * the thunks it pins: the thunk called and every thunk the call can reach
 * (what it depends on, at every level, and the thunks forwarded to its
 * function-pointer parameters, with theirs). A pinned thunk counts the
 * call as in flight, as the thunk called does, and the frame holds a
 * reference to it: release() waits for the call (another thread) or leaves
 * the teardown to its return (this thread), reclaim() defers, whichever
 * thunk of the call they are asked of. The walk is on the Python call
 * path only; calls from C through an address count nothing.
 */
typedef struct call_frame {
    struct call_frame *up;
    ThunkObject **pins; /* small, or allocated */
    int npins, cap;
    ThunkObject *small[8];
} call_frame;

static NT_THREAD_LOCAL call_frame *calls;

/* Whether a call of this thread pins self: release() must not wait for
   its own caller. */
static int in_own_call(ThunkObject *self)
{
    for (call_frame *f = calls; f != NULL; f = f->up)
        for (int k = 0; k < f->npins; k++)
            if (f->pins[k] == self)
                return 1;
    return 0;
}

/* In a child of fork(), calls from Python in flight are counted again:
   only this thread's own calls that pin the thunk (on its frame list) go
   on. Out of line: the call path reads this thread's frame list only here. */
NT_NOINLINE NT_COLD static void recount(ThunkObject *self)
{
    int32_t n = 0;
    for (call_frame *f = calls; f != NULL; f = f->up)
        for (int k = 0; k < f->npins; k++)
            n += f->pins[k] == self;
    self->inflight = n;
    self->fork_gen = nt_fork_generation;
}

/* Calls from Python in flight. */
#define inflight(self) \
    ((self)->fork_gen == nt_fork_generation ? (self)->inflight : (recount(self), (self)->inflight))

/* A call from Python ends for one thunk it pinned: the last one out does
   what release() or reclaim() left to it. */
static void call_done(ThunkObject *self)
{
    if (--self->inflight > 0)
        return;
    if (self->released) {
        nt_thunk_teardown(self);
    } else if (self->reclaim_pending) {
        self->reclaim_pending = 0;
        nt_thunk_reclaim_now(self);
    }
}

/* A frame's room for one more pin, grown: 0, or -1 with MemoryError. */
static int more_pins(call_frame *f)
{
    int ncap = 2 * f->cap;
    ThunkObject **more = PyMem_Malloc((size_t)ncap * sizeof(*more));
    if (more == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(more, f->pins, (size_t)f->npins * sizeof(*more));
    if (f->pins != f->small)
        PyMem_Free(f->pins);
    f->pins = more;
    f->cap = ncap;
    return 0;
}

/* t pinned by frame f: counted in flight and held. 0, or -1 with
   MemoryError. */
static inline int pin_one(call_frame *f, ThunkObject *t)
{
    if (f->npins == f->cap && more_pins(f) < 0)
        return -1;
    t->inflight = inflight(t) + 1;
    f->pins[f->npins++] = (ThunkObject *)Py_NewRef(t);
    return 0;
}

/* What the thunks pinned from index k on use, at every level, pinned by
   f too: the pins are the walk's work list, and a thunk with dependencies
   is marked with the walk's number (life/commit.c's walks), so each is pinned
   once (a leaf reached twice is pinned twice, which counts alike). 0, or
   -1 with MemoryError (what was pinned stays on f, for unpin). */
static int pin_below(call_frame *f, int k)
{
    uint64_t walk = nt_thunk_walk();
    for (int m = k; m < f->npins; m++)
        if (f->pins[m]->x != NULL)
            f->pins[m]->x->mark = walk;
    for (; k < f->npins; k++) {
        extra *x = f->pins[k]->x;
        for (int j = 0; x != NULL && j < x->ndeps; j++) {
            ThunkObject *d = x->deps[j].thunk;
            if (d->x != NULL) {
                if (d->x->mark == walk)
                    continue;
                d->x->mark = walk;
            }
            if (pin_one(f, d) < 0)
                return -1;
        }
    }
    return 0;
}

/* t and every thunk it uses pinned by f: 0, or -1 with MemoryError. */
static inline int pin(call_frame *f, ThunkObject *t)
{
    int k = f->npins;
    if (pin_one(f, t) < 0)
        return -1;
    return t->x == NULL || t->x->ndeps == 0 ? 0 : pin_below(f, k);
}

/* The call of frame f is over: each thunk it pinned is done, then let go
   (a teardown may free the thunk's dependencies; the frame's references
   keep every pinned thunk until here). */
static void unpin(call_frame *f)
{
    for (int k = 0; k < f->npins; k++) {
        inflight(f->pins[k]); /* a fork() meanwhile: count this call again */
        call_done(f->pins[k]);
    }
    for (int k = 0; k < f->npins; k++)
        Py_DECREF(f->pins[k]);
    if (f->pins != f->small)
        PyMem_Free(f->pins);
}

/* An object the thunk holds a buffer export of is not reported to the
   collector (as NumPy, which does not take part in collection at all, never
   reports the exporter behind an array): a memoryview refuses tp_clear while
   exported and is left unusable (its dealloc read through NULL), and no
   exporter promises that clearing it keeps the exported memory. Unreported,
   the exporter counts as referenced from outside any cycle, so it is never
   cleared while held; the thunk and the rest of a cycle are still
   collected, and the thunk's teardown gives the export back. */
static int exported(nt_held *held, PyObject *obj)
{
    for (nt_held *h = held; h != NULL; h = h->next)
        if (h->view.obj == obj)
            return 1;
    return 0;
}

static int thunk_traverse(ThunkObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self)); /* a heap type: its instances hold it */
    Py_VISIT(self->sig);
    Py_VISIT(self->owner);
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++)
        if (!exported(self->b[i].held, self->b[i].value))
            Py_VISIT(self->b[i].value);
    if (self->x != NULL) {
        Py_VISIT(self->x->csig);
        Py_VISIT(self->x->numba_type);
        for (int k = 0; k < self->x->ndeps; k++)
            Py_VISIT(self->x->deps[k].thunk);
        for (Py_ssize_t k = 0; k < self->x->nretired; k++)
            if (!exported(self->x->retired_held, self->x->retired[k]))
                Py_VISIT(self->x->retired[k]);
    }
    return 0;
}

static int thunk_clear_held(ThunkObject *self)
{
    /* A thunk with a call in flight is reachable from that call. */
    if (inflight(self) > 0)
        return 0;
    nt_thunk_teardown(self);
    Py_CLEAR(self->owner);
    if (self->x != NULL) {
        Py_CLEAR(self->x->csig);
        Py_CLEAR(self->x->numba_type);
    }
    return 0;
}

static void thunk_dealloc(ThunkObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    extra *x;
    PyObject *owner, *sig;
    NT_LOCK_BEGIN
    /* Torn down, and out of the registry, before the weakref callbacks
       below run Python code: an address of it bound from there is refused
       as a collected thunk's (the Python code teardown itself may run, a
       bound value's finalizer, finds it at a reference count of 0, which
       nt_thunk_identify refuses too). Released, a thunk stayed in the
       registry while it existed: whatever still held it and was bound
       again was refused. Its address, reused meanwhile by a new thunk
       (after the quarantine), is that thunk's entry, left alone. */
    nt_thunk_teardown(self);
    nt_registry_bury(self, self->address, self->released_at);
    NT_LOCK_END
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    NT_LOCK_BEGIN
    if (self->plan_owned)
        nt_plan_free(self->plan);
    if (!self->ctx_inline)                         /* teardown leaves the first context */
        nt_aligned_free(nt_thunk_first_ctx(self)); /* nt_ctx_new's */
    x = self->x;
    self->x = NULL;
    owner = self->owner;
    sig = (PyObject *)self->sig;
    self->owner = NULL;
    self->sig = NULL;
    NT_LOCK_END
    /* The thunk is out of every table and graph: what it held goes
       outside the lock (a finalizer may run), read from it before. */
    if (x != NULL) {
        Py_XDECREF(x->csig);
        Py_XDECREF(x->numba_type);
        nt_call_free(x->call);
        PyMem_Free(x->mvspecs);
        PyMem_Free(x->users);
        PyMem_Free(x);
    }
    Py_XDECREF(owner);
    Py_XDECREF(sig);
    type->tp_free((PyObject *)self);
    Py_DECREF(type); /* subclasses too: the base is a heap type */
}


/* The values of args, a tuple. */
static void values_of(nt_new_args *a, PyObject *args)
{
    a->values = PySequence_Fast_ITEMS(args);
    a->nvalues = PyTuple_GET_SIZE(args);
}

static int parse_nt_new_args(PyObject *args, PyObject *kwds, nt_new_args *a)
{
    static char *kwlist[] = { "signature", "address", "args", "owner",   "nogil",
                              "memviews",  "engine",  "via",  "carried", NULL };
    *a = (nt_new_args){ .owner = Py_None,
                        .memviews = Py_None,
                        .engine = Py_None,
                        .via = Py_None,
                        .carried = Py_None,
                        .nogil = 1 };
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (kwds == NULL && n >= 3 && n <= 9) {
        /* bind() passes everything by position: keyword parsing would be a
           sizeable part of the creation cost. */
        PyObject *const *v = &PyTuple_GET_ITEM(args, 0);
        a->sig = (nt_SignatureObject *)v[0];
        a->address = v[1];
        if (n > 3)
            a->owner = v[3];
        if (n > 4 && (a->nogil = PyObject_IsTrue(v[4])) < 0)
            return -1;
        if (n > 5)
            a->memviews = v[5];
        if (n > 6)
            a->engine = v[6];
        if (n > 7)
            a->via = v[7];
        if (n > 8)
            a->carried = v[8];
        if (!PyObject_TypeCheck(v[0], nt_get_state()->signature_type) || !PyTuple_Check(v[2])) {
            PyErr_SetString(PyExc_TypeError, "Thunk(signature, address, args: tuple, ...)");
            return -1;
        }
        values_of(a, v[2]);
        return 0;
    }
    PyObject *values;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO!|OpOOOO:Thunk", kwlist,
                                     nt_get_state()->signature_type, &a->sig, &a->address,
                                     &PyTuple_Type, &values, &a->owner, &a->nogil, &a->memviews,
                                     &a->engine, &a->via, &a->carried))
        return -1;
    values_of(a, values);
    return 0;
}

/* engine=: None or a name nt_engine_parse knows. */
static int engine_of(PyObject *engine, const nt_engine **wanted)
{
    *wanted = NULL;
    if (engine == Py_None)
        return 0;
    if (!PyUnicode_Check(engine)) {
        PyErr_Format(PyExc_TypeError,
                     "engine= must be a str (" NT_ENGINE_NAMES ") or None, "
                     "not %.100s",
                     Py_TYPE(engine)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(engine, &len);
    if (name == NULL)
        return -1;
    if (strlen(name) != (size_t)len) { /* "ffi\0..." is not "ffi" */
        PyErr_Format(PyExc_ValueError, "engine=%R: expected " NT_ENGINE_NAMES, engine);
        return -1;
    }
    nt_error err;
    nt_error_init(&err);
    if (nt_engine_parse(name, "engine=", wanted, &err) != NT_OK) {
        nt_raise(&err);
        return -1;
    }
    return 0;
}

/* The target address: 1 .. UINTPTR_MAX (a negative int is no address). */
static void *check_target(const nt_new_args *a)
{
    uintptr_t p;
    if (nt_pointer_value(a->address, "target address", &p) < 0)
        return NULL;
    if (p == 0)
        PyErr_SetString(PyExc_ValueError, "target address is 0 (NULL)");
    return (void *)p;
}

/* Thunk(...) once its arguments are parsed: the resolve phase, then the
   commit (nt_thunk_create). Under the state lock. */
PyObject *nt_thunk_make(PyTypeObject *type, nt_new_args *a)
{
    const nt_engine *wanted;
    if (engine_of(a->engine, &wanted) < 0)
        return NULL;
    void *target = check_target(a);
    if (target == NULL)
        return NULL;
    PyObject *resolved = NULL;
    if (a->nvalues == a->sig->sig->nargs /* else check_values says why */
        && nt_thunk_resolve(type, a->sig, a->values, a->nvalues, a->owner, &resolved) < 0)
        return NULL;
    PyObject *const *values = resolved != NULL ? PySequence_Fast_ITEMS(resolved) : a->values;
    PyObject *self = nt_thunk_create(type, a->sig, target, values, a->nvalues, a->owner, a->nogil,
                                     a->memviews, wanted, a->via, a->carried);
    Py_XDECREF(resolved);
    return self;
}

static PyObject *thunk_new_held(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    nt_new_args a;
    if (parse_nt_new_args(args, kwds, &a) < 0)
        return NULL;
    return nt_thunk_make(type, &a);
}

PyObject *nt_thunk_new_positional(PyObject *module, PyObject *const *v, Py_ssize_t n)
{
    (void)module;
    nt_state *st = nt_get_state();
    if (n != 10 || !PyType_Check(v[0]) || !PyType_IsSubtype((PyTypeObject *)v[0], st->thunk_type)
        || !PyObject_TypeCheck(v[1], st->signature_type) || !PyTuple_Check(v[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "_new_thunk(type, signature, address, args: tuple, "
                        "owner, nogil, memviews, engine, via, carried)");
        return NULL;
    }
    nt_new_args a = { .sig = (nt_SignatureObject *)v[1],
                      .address = v[2],
                      .owner = v[4],
                      .memviews = v[6],
                      .engine = v[7],
                      .via = v[8],
                      .carried = v[9] };
    values_of(&a, v[3]);
    if (v[5] == Py_True || v[5] == Py_False)
        a.nogil = v[5] == Py_True;
    else if ((a.nogil = PyObject_IsTrue(v[5])) < 0)
        return NULL;
    PyObject *r;
    NT_LOCK_BEGIN
    r = nt_thunk_make((PyTypeObject *)v[0], &a);
    NT_LOCK_END
    return r;
}

/* ---- attributes ---- */

static PyObject *thunk_address_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    return PyLong_FromVoidPtr(self->address);
}

/* The address a call that no thunk(...) counts may use (Numba's unboxing
   and compiled-in constants, t.ctypes and t.opaque() called from Python):
   refused while a call would reach a trap, the thunk's own or that of a
   thunk it uses, as thunk(...) refuses it. */
static PyObject *thunk_wrapper_address_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (NT_UNUSABLE(self) && nt_thunk_unusable_error(self) < 0)
        return NULL;
    return PyLong_FromVoidPtr(self->address);
}

static PyObject *thunk_csig_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (self->x != NULL && self->x->csig != NULL)
        return Py_NewRef(self->x->csig);
    /* a description, read from the plan and signature a released thunk
       keeps too: the same whether or not it was read before release */
    extra *x = nt_thunk_extra(self);
    if (x == NULL)
        return NULL;
    nt_sig *copy = nt_sig_copy(self->sig->sig);
    if (copy == NULL)
        return PyErr_NoMemory();
    /* Keep the forwarded parameters (with their names), in order. */
    int k = 0;
    for (int i = 0; i < copy->nargs; i++) {
        if (self->plan->slots[i].src == NT_SRC_ARG) {
            copy->args[k] = copy->args[i];
            if (copy->names != NULL)
                copy->names[k] = copy->names[i];
            k++;
        } else {
            if (copy->args[i].fn != NULL)
                nt_sig_free(copy->args[i].fn);
            if (copy->names != NULL)
                free(copy->names[i]);
        }
    }
    copy->nargs = k;
    PyObject *csig = nt_signature_wrap(Py_TYPE(self->sig), copy);
    if (csig == NULL)
        return NULL;
    if (x->csig == NULL)
        x->csig = Py_NewRef(csig);
    return csig;
}

PyObject *nt_thunk_csig(ThunkObject *self)
{
    return thunk_csig_held(self, NULL);
}

/* Numba reads _numba_type_ twice for every call that passes the thunk to
   compiled code: a C getter with the type cached on the thunk keeps that
   off the Python level. The package's registered numba_type makes the
   type the first time (it imports Numba); the core type alone has none. */
static PyObject *thunk_numba_type_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (self->x != NULL && self->x->numba_type != NULL)
        return Py_NewRef(self->x->numba_type);
    nt_state *st = nt_get_state();
    if (!nt_state_hooks_for(st, Py_TYPE(self))) {
        PyErr_Format(PyExc_AttributeError, "a %.100s has no Numba type (numthunk.Thunk has)",
                     Py_TYPE(self)->tp_name);
        return NULL;
    }
    PyObject *t = PyObject_CallOneArg(st->numba_type, (PyObject *)self);
    if (t == NULL)
        return NULL;
    extra *x = nt_thunk_extra(self);
    if (x == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    if (x->numba_type == NULL)
        x->numba_type = Py_NewRef(t);
    return t;
}

static PyObject *thunk_target_signature(ThunkObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->sig);
}

static PyObject *thunk_target_held(ThunkObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->owner != NULL ? self->owner : Py_None);
}

static PyObject *thunk_target_address(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(nt_thunk_target(self));
}

static PyObject *thunk_nogil_held(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->nogil);
}

static PyObject *thunk_released_held(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->released);
}

static PyObject *thunk_chain_held(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->chain);
}

/* (thunk, ...): what this thunk uses now, in the order recorded */
static PyObject *thunk_dependencies_held(ThunkObject *self, void *closure)
{
    (void)closure;
    int n = self->x != NULL ? self->x->ndeps : 0;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (int k = 0; k < n; k++)
        PyTuple_SET_ITEM(t, k, Py_NewRef((PyObject *)self->x->deps[k].thunk));
    return t;
}

static PyObject *thunk_engine_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    return PyUnicode_FromString(self->entry.engine->name);
}

/* (value or ARG, ...) in target parameter order */
static PyObject *thunk_bindings_held(ThunkObject *self, void *closure)
{
    (void)closure;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    PyObject *t = PyTuple_New(Py_SIZE(self));
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++) {
        PyObject *v = self->b[i].value != NULL ? self->b[i].value : NT_ARG;
        PyTuple_SET_ITEM(t, i, Py_NewRef(v));
    }
    return t;
}

/* ---- calling from Python ---- */

/* The libffi call a call from Python makes (engine/ffi.c), once. */
static int prepare_call(ThunkObject *self)
{
    extra *x = nt_thunk_extra(self);
    if (x == NULL)
        return -1;
    if (x->call != NULL)
        return 0;
    const nt_plan *plan = self->plan;
    const nt_sig *sig = self->sig->sig;
    nt_error err;
    nt_error_init(&err);
    x->call = nt_call_new(sig, plan, &err);
    if (x->call == NULL) {
        nt_raise(&err);
        return -1;
    }
    for (int k = 0; k < plan->nfwd; k++)
        x->fwd_functions |= sig->args[plan->fwd_index[k]].kind == NT_FNPTR;
    return 0;
}

/* Forwarded values the converter does not know go to the Python package's
   registered resolve_call first: before any state is read, so whatever that does
   (even release this thunk) is seen by the check that follows. */
static PyObject *resolve_call_args(ThunkObject *self, PyObject *args)
{
    const nt_plan *plan = self->plan;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t k = 0; k < n && k < plan->nfwd; k++) {
        const nt_type *t = &self->sig->sig->args[plan->fwd_index[k]];
        int need = nt_needs_resolve(t, PyTuple_GET_ITEM(args, k));
        if (need < 0)
            return NULL;
        if (need) {
            /* Called outside the state lock (call_held): the hook is read
               under it, as _register replaces it under it. */
            PyObject *hook = NULL;
            NT_LOCK_BEGIN
            nt_state *st = nt_get_state();
            if (nt_state_hooks_for(st, Py_TYPE(self)))
                hook = Py_NewRef(st->resolve_call);
            NT_LOCK_END
            if (hook == NULL)
                return Py_NewRef(args); /* the converter refuses them by name */
            PyObject *r = PyObject_CallFunctionObjArgs(hook, (PyObject *)self, args, NULL);
            Py_DECREF(hook);
            if (r != NULL && !PyTuple_Check(r)) {
                Py_DECREF(r);
                PyErr_SetString(PyExc_TypeError, "the package's resolve_call must return a tuple");
                return NULL;
            }
            return r;
        }
    }
    return Py_NewRef(args);
}

/* Functions forwarded to function-pointer parameters, converted: a thunk
   among them is identified as a bound one is (the thunk its spelling
   carries, else the registry's, of the parameter's signature), refused
   when released (its address would trap), and pinned by this call with
   what it uses; one that needs the GIL makes this call keep it. */
static int forwarded_functions(ThunkObject *self, PyObject *args, const nt_memviewslice *cells,
                               int *nogil)
{
    const nt_plan *plan = self->plan;
    for (int k = 0; k < plan->nfwd; k++) {
        int i = plan->fwd_index[k];
        const nt_type *t = &self->sig->sig->args[i];
        if (t->kind != NT_FNPTR)
            continue;
        void *p;
        memcpy(&p, &cells[k], sizeof(p));
        PyObject *v = PyTuple_GET_ITEM(args, k);
        ThunkObject *d;
        if (nt_thunk_identify(p, nt_address_owner(v), self->sig->sig, i, &d) < 0)
            return -1;
        if (d != NULL && NT_UNUSABLE(d)) {
            char what[300];
            nt_param_label(self->sig->sig, i, what, sizeof(what));
            return nt_thunk_refuse_released(what, d, "pass");
        }
        if (d != NULL) {
            *nogil &= d->nogil;
            if (pin(calls, d) < 0)
                return -1;
        } else if (nt_is_address(v) && ((nt_AddressObject *)v)->needs_gil) {
            *nogil = 0;
        }
    }
    return 0;
}

/* The forwarded arguments of a call, converted into its cells. Conversion
   reads what creation fixed and this call's own cells: it runs outside
   the state lock lk, as with a GIL it may let the GIL go. 0, or -1 with an
   exception set; held keeps the buffers taken either way. */
static int convert_forwarded(ThunkObject *self, PyObject *args, nt_memviewslice *cells,
                             void **avalues, nt_held **held, nt_lock_state *lk)
{
    const nt_plan *plan = self->plan;
    const nt_sig *sig = self->sig->sig;
    int converted = 1;
    if (plan->nfwd == 0)
        return 0;
    NT_UNLOCK(lk);
    for (int k = 0; k < plan->nfwd && converted; k++) {
        int i = plan->fwd_index[k];
        converted = nt_convert_arg(sig, i, PyTuple_GET_ITEM(args, k), &cells[k], held,
                                   nt_thunk_mvspec(self, i))
            == 0;
        avalues[k] = &cells[k];
    }
    NT_LOCK(lk);
    return converted ? 0 : -1;
}

/* lk: the state lock, left around the target (python/pyapi.h): other threads
   call, rebind and release meanwhile; the count in flight keeps this
   call's entry, contexts and buffers. */
static PyObject *call_target(ThunkObject *self, PyObject *args, nt_lock_state *lk)
{
    const nt_plan *plan = self->plan;
    const nt_sig *sig = self->sig->sig;
    /* Each forwarded value gets a cell big enough for any kind. */
    nt_memviewslice *cells = NULL;
    void **avalues = NULL;
    nt_held *held = NULL;
    PyObject *result = NULL;
    if (prepare_call(self) < 0)
        return NULL;
    if (plan->nfwd > 0) {
        cells = PyMem_Calloc((size_t)plan->nfwd, sizeof(nt_memviewslice));
        avalues = PyMem_Calloc((size_t)plan->nfwd, sizeof(void *));
        if (cells == NULL || avalues == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (convert_forwarded(self, args, cells, avalues, &held, lk) < 0)
        goto done;
    /* Conversion may have run Python code: a release() made meanwhile
       left the thunk standing for this call, which now gives up. */
    if (self->released) {
        PyErr_SetString(PyExc_ValueError,
                        "the thunk was released while its arguments were converted" SEE_LIFETIME);
        goto done;
    }
    if (self->broken) {
        nt_thunk_unusable_error(self);
        goto done;
    }
    int nogil = self->nogil;
    if (self->x->fwd_functions && forwarded_functions(self, args, cells, &nogil) < 0)
        goto done;
    union {
        uint64_t w[2];
        double d[2];
    } ret = { { 0, 0 } };
    void *fn = self->address;
    const nt_call *call = self->x->call;
    NT_UNLOCK(lk);
    if (nogil) {
        Py_BEGIN_ALLOW_THREADS
        nt_call_run(call, fn, &ret, avalues);
        Py_END_ALLOW_THREADS
    } else {
        nt_call_run(call, fn, &ret, avalues);
    }
    NT_LOCK(lk);
    /* A target that needs the GIL (Cython) may return with an exception set. */
    if (!nogil && PyErr_Occurred())
        goto done;
    result = nt_to_python(&sig->ret, &ret);
done:
    nt_held_release(held);
    PyMem_Free(cells);
    PyMem_Free(avalues);
    return result;
}

static PyObject *call_held(ThunkObject *self, PyObject *args, PyObject *kwds, nt_lock_state *lk)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "a thunk takes positional arguments only");
        return NULL;
    }
    /* Python code, over the signature and plan only: outside the lock. */
    int nfwd = self->plan->nfwd;
    if (nfwd > 0)
        NT_UNLOCK(lk);
    PyObject *resolved = resolve_call_args(self, args);
    if (nfwd > 0)
        NT_LOCK(lk);
    if (resolved == NULL)
        return NULL;
    PyObject *result = NULL;
    if (NT_UNUSABLE(self) && nt_thunk_unusable_error(self) < 0)
        goto out;
    Py_ssize_t nargs = PyTuple_GET_SIZE(resolved);
    if (nargs != self->plan->nfwd) {
        PyErr_Format(PyExc_TypeError, "the thunk takes %d argument%s, got %zd", self->plan->nfwd,
                     self->plan->nfwd == 1 ? "" : "s", nargs);
        goto out;
    }
    /* In flight from here, for the thunk and every thunk it uses:
       release() and reclaim() of any of them leave their entries, contexts
       and buffers alone until this call returns. */
    call_frame frame; /* its small room is filled as pins go in */
    frame.up = calls;
    frame.pins = frame.small;
    frame.npins = 0;
    frame.cap = (int)(sizeof(frame.small) / sizeof(frame.small[0]));
    calls = &frame;
    if (pin(&frame, self) == 0)
        result = call_target(self, resolved, lk);
    calls = frame.up;
    unpin(&frame);
out:
    Py_DECREF(resolved);
    return result;
}

static PyObject *thunk_call(ThunkObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *r;
    NT_LOCK_BEGIN
    r = call_held(self, args, kwds, &nt_lock_);
    NT_LOCK_END
    return r;
}

/* ---- rebind / reclaim / release ---- */

/* KeyError: key names no parameter of sig. Says which names there are,
   with their indexes, or that there are none (a Numba @cfunc's signature
   never names its parameters), and gives the index form. */
static void no_parameter_named(const nt_sig *sig, PyObject *key)
{
    char names[400], index[64];
    size_t len = 0;
    int named = 0;
    names[0] = '\0';
    for (int i = 0; i < sig->nargs; i++) {
        if (sig->names == NULL || sig->names[i] == NULL)
            continue;
        if (len < sizeof(names))
            len += (size_t)PyOS_snprintf(names + len, sizeof(names) - len, "%s'%s' (%d)",
                                         named > 0 ? ", " : "", sig->names[i], i);
        named++;
    }
    nt_mark_cut(names, sizeof(names), len);
    if (sig->nargs == 1)
        PyOS_snprintf(index, sizeof(index), "rebind(0, ...)");
    else
        PyOS_snprintf(index, sizeof(index), "rebind(0, ...) to rebind(%d, ...)", sig->nargs - 1);
    if (sig->nargs == 0)
        PyErr_Format(PyExc_KeyError, "the target has no parameter named %R: it has no parameters",
                     key);
    else if (named == 0)
        PyErr_Format(PyExc_KeyError,
                     "the target has no parameter named %R: its signature names none of its "
                     "parameters (a Numba @cfunc's never does); name one by its index, %s",
                     key, index);
    else
        PyErr_Format(PyExc_KeyError,
                     "the target has no parameter named %R; its named parameter%s %s %s, and "
                     "any parameter may be named by its index, %s",
                     key, named == 1 ? "" : "s", named == 1 ? "is" : "are", names, index);
}

static int param_index(ThunkObject *self, PyObject *key)
{
    const nt_sig *sig = self->sig->sig;
    if (PyUnicode_Check(key)) {
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(key, &len);
        if (name == NULL)
            return -1;
        for (int i = 0; i < sig->nargs && (size_t)len == strlen(name); i++)
            if (sig->names != NULL && sig->names[i] != NULL && strcmp(sig->names[i], name) == 0)
                return i;
        no_parameter_named(sig, key);
        return -1;
    }
    if (PyBool_Check(key) || !PyIndex_Check(key)) {
        PyErr_Format(PyExc_TypeError,
                     "a parameter is named by its index (int) or its "
                     "name (str), not by a %.100s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    PyObject *num = PyNumber_Index(key);
    if (num == NULL)
        return -1;
    int ovf = 0;
    long long i = PyLong_AsLongLongAndOverflow(num, &ovf);
    if (ovf != 0 || i < 0 || i >= sig->nargs) {
        if (sig->nargs == 0)
            PyErr_Format(PyExc_IndexError,
                         "parameter index %S out of range (the target has 0 parameters)", num);
        else
            PyErr_Format(PyExc_IndexError,
                         "parameter index %S out of range (the target has %d "
                         "parameter%s: 0 to %d)",
                         num, sig->nargs, sig->nargs == 1 ? "" : "s", sig->nargs - 1);
        Py_DECREF(num);
        return -1;
    }
    Py_DECREF(num);
    return (int)i;
}

static int rebind_key_held(PyObject *thunk, PyObject *key, PyObject *value)
{
    ThunkObject *self = (ThunkObject *)thunk;
    if (nt_thunk_released_error(self) < 0)
        return -1;
    int i = param_index(self, key);
    if (i < 0)
        return -1;
    int need = value != NT_ARG ? nt_needs_resolve(&self->sig->sig->args[i], value) : 0;
    if (need < 0)
        return -1;
    nt_state *st = nt_get_state();
    if (!need || !nt_state_hooks_for(st, Py_TYPE(self)))
        return nt_thunk_rebind(self, i, value); /* the converter refuses foreign ones */
    /* Resolve: a foreign value (a ctypes pointer, a Function) becomes one
       the converter takes, by the package's code. */
    PyObject *resolved = PyObject_CallFunction(st->resolve_rebind, "OiO", thunk, i, value);
    if (resolved == NULL)
        return -1;
    int r = nt_thunk_rebind(self, i, resolved);
    Py_DECREF(resolved);
    return r;
}

/* The C API's rebind (python/capi.c): under the state lock, as Thunk.rebind. */
int nt_thunk_rebind_key(PyObject *thunk, PyObject *key, PyObject *value)
{
    int r;
    NT_LOCK_BEGIN
    r = rebind_key_held(thunk, key, value);
    NT_LOCK_END
    return r;
}

static PyObject *thunk_rebind_held(ThunkObject *self, PyObject *args)
{
    PyObject *key, *value;
    if (!PyArg_ParseTuple(args, "OO:rebind", &key, &value))
        return NULL;
    if (rebind_key_held((PyObject *)self, key, value) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *thunk_reclaim_held(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    if (inflight(self) > 0)
        self->reclaim_pending = 1; /* the last call out reclaims */
    else
        nt_thunk_reclaim_now(self);
    Py_RETURN_NONE;
}

/* lk: the state lock the caller holds, left during the wait. */
static PyObject *release_held(ThunkObject *self, nt_lock_state *lk)
{
    (void)lk;
    if (!self->released) {
        nt_thunk_mark_released(self);
        /* Calls from other threads are waited for; a call of this thread
           (we are inside it: its target called back) tears down on return.
           The wait takes signals: on Ctrl-C the last call out tears down. */
        if (inflight(self) > 0 && !in_own_call(self)) {
            while (inflight(self) > 0 && !self->torn) {
                NT_UNLOCK(lk);
                Py_BEGIN_ALLOW_THREADS
                nt_nap();
                Py_END_ALLOW_THREADS
                NT_LOCK(lk);
                if (PyErr_CheckSignals() < 0)
                    return NULL;
            }
        }
    }
    if (inflight(self) == 0)
        nt_thunk_teardown(self);
    Py_RETURN_NONE;
}


static PyObject *thunk_enter_held(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *thunk_release(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *r;
    NT_LOCK_BEGIN
    r = release_held(self, &nt_lock_);
    NT_LOCK_END
    return r;
}

static PyObject *thunk_exit(ThunkObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = thunk_release(self, NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

/* _needs_resolve(key, value): the parameter's index if the Python package
   must resolve value before rebind() takes it, else None. */
static PyObject *thunk_needs_resolve_held(ThunkObject *self, PyObject *args)
{
    PyObject *key, *value;
    if (!PyArg_ParseTuple(args, "OO:_needs_resolve", &key, &value))
        return NULL;
    int i = param_index(self, key);
    if (i < 0)
        return NULL;
    int need = nt_needs_resolve(&self->sig->sig->args[i], value);
    if (need < 0)
        return NULL;
    if (!need)
        Py_RETURN_NONE;
    return PyLong_FromLong(i);
}

/* ---- for Numba's inlined calls (numthunk/_numba_ext.py) ---- */

/*
 * _inline_layout() -> (cell, values, slots): where compiled code finds this
 * thunk's bound values at each call. cell: the byte offset, in the thunk
 * object, of its published context pointer (NULL once the thunk is
 * released; read with a relaxed load, the value loads ordered after it by
 * their address dependency: numthunk/_numba_ext.py). values: the offset of
 * the values in a context. slots: per target parameter, ("arg", kind,
 * index among the thunk's parameters) or ("bound", kind, byte offset in
 * the values).
 *
 * The object's own cell, not the entry's: the object lives as long as
 * compiled code holds it (Numba's value holds a reference), while a
 * released entry leaves the quarantine after later releases and is then
 * freed (libffi) or serves another thunk (native).
 */
static PyObject *thunk_inline_layout_held(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    if (nt_thunk_released_error(self) < 0)
        return NULL;
    const nt_plan *plan = self->plan;
    PyObject *slots = PyTuple_New(plan->nargs);
    if (slots == NULL)
        return NULL;
    for (int i = 0; i < plan->nargs; i++) {
        const nt_slot *s = &plan->slots[i];
        int bound = s->src == NT_SRC_BOUND;
        PyObject *item = Py_BuildValue("(ssn)", bound ? "bound" : "arg",
                                       nt_kind_name(self->sig->sig->args[i].kind),
                                       (Py_ssize_t)(bound ? s->offset : s->fwd));
        if (item == NULL) {
            Py_DECREF(slots);
            return NULL;
        }
        PyTuple_SET_ITEM(slots, i, item);
    }
    return Py_BuildValue("(nnN)", (Py_ssize_t)offsetof(ThunkObject, ctx),
                         (Py_ssize_t)NT_CTX_VALUES_OFFSET, slots);
}

/* ---- for the C API (python/capi.c) ---- */

void *nt_thunk_address(PyObject *thunk)
{
    ThunkObject *self = (ThunkObject *)thunk;
    void *address = NULL;
    NT_LOCK_BEGIN
    if (nt_thunk_released_error(self) == 0)
        address = self->address;
    NT_LOCK_END
    return address;
}

int nt_thunk_release(PyObject *thunk)
{
    PyObject *r = thunk_release((ThunkObject *)thunk, NULL);
    Py_XDECREF(r);
    return r != NULL ? 0 : -1;
}

/* Python's entry points: each holds the state lock (python/pyapi.h) around the
   body above; nothing with the GIL. */
/* Each use ends in a declaration and its semicolon, as a statement at
   file scope reads (and tests/test_structure.py's scan of src/ needs). */
// clang-format off
#define LOCKED(type, name, params, args) \
    static type name params \
    { \
        type r; \
        NT_LOCK_BEGIN r = name##_held args; NT_LOCK_END \
        return r; \
    } \
    static type name params
LOCKED(int, thunk_clear, (ThunkObject *self), (self));
LOCKED(PyObject *, thunk_new, (PyTypeObject *type, PyObject *args, PyObject *kwds), (type, args, kwds));
LOCKED(PyObject *, thunk_address, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_wrapper_address, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_csig, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_numba_type, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_target, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_nogil, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_released, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_chain, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_dependencies, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_engine, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_bindings, (ThunkObject *self, void *closure), (self, closure));
LOCKED(PyObject *, thunk_rebind, (ThunkObject *self, PyObject *args), (self, args));
LOCKED(PyObject *, thunk_reclaim, (ThunkObject *self, PyObject *unused), (self, unused));
LOCKED(PyObject *, thunk_enter, (ThunkObject *self, PyObject *unused), (self, unused));
LOCKED(PyObject *, thunk_needs_resolve, (ThunkObject *self, PyObject *args), (self, args));
LOCKED(PyObject *, thunk_inline_layout, (ThunkObject *self, PyObject *unused), (self, unused));
// clang-format on

/* .backend, the old name of .engine: kept for one release. Level 1 points
   the warning at the Python line that read the attribute. */
static PyObject *thunk_backend_deprecated(ThunkObject *self, void *closure)
{
    if (PyErr_WarnEx(PyExc_DeprecationWarning,
                     "Thunk.backend is deprecated: use Thunk.engine (the same value)", 1)
        < 0)
        return NULL;
    return thunk_engine(self, closure);
}

static PyGetSetDef thunk_getset[] = {
    { "address", (getter)thunk_address, NULL,
      "the thunk's C address (int). An address does not hold the thunk: keep the thunk "
      "itself (in a variable, or `with nt.bind(...) as t:`) for as long as C code may "
      "call it. solver(nt.bind(...).address) hands over the address of a temporary, "
      "released when the expression ends: its calls reach the released-thunk trap. "
      "Bound again (an int with signature=, numthunk.address(n), a function-pointer "
      "value), the address is recognised and the new thunk holds this one",
      NULL },
    { "_wrapper_address_", (getter)thunk_wrapper_address, NULL,
      "the address, for callers that do not count their calls (Numba, t.ctypes): "
      "ValueError when the thunk or one it uses is released",
      NULL },
    { "csig", (getter)thunk_csig, NULL, "the thunk's own C signature", NULL },
    { "target_signature", (getter)thunk_target_signature, NULL, "the target's signature", NULL },
    { "target", (getter)thunk_target, NULL, "the target object", NULL },
    { "target_address", (getter)thunk_target_address, NULL, "the target's C address", NULL },
    { "nogil", (getter)thunk_nogil, NULL,
      "whether a call may run without the GIL: the target and every thunk and function "
      "it uses allow it",
      NULL },
    { "released", (getter)thunk_released, NULL, "whether release() was called", NULL },
    { "engine", (getter)thunk_engine, NULL,
      "the engine running this thunk: the native engine's name (e.g. 'native-x86_64-sysv') "
      "or 'libffi'",
      NULL },
    { "backend", (getter)thunk_backend_deprecated, NULL,
      "deprecated: the old name of engine, warns (DeprecationWarning)", NULL },
    { "bindings", (getter)thunk_bindings, NULL, "bound values, ARG where forwarded", NULL },
    { "chain", (getter)thunk_chain, NULL,
      "the longest path of thunks below this one, each calling the next (as a target, a "
      "bound function pointer or a declared dependency)",
      NULL },
    { "dependencies", (getter)thunk_dependencies, NULL,
      "the thunks this one uses now (its target, bound function pointers, the target's "
      "Function.depends); it holds them",
      NULL },
    { "_numba_type_", (getter)thunk_numba_type, NULL, "Numba's type of this function value", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef thunk_methods[] = {
    { "rebind", (PyCFunction)thunk_rebind, METH_VARARGS,
      "rebind(index_or_name, value): replace a bound value; .address does not change" },
    { "reclaim", (PyCFunction)thunk_reclaim, METH_NOARGS,
      "free contexts and buffers retired by rebind(); with calls from Python in "
      "flight, when the last of them returns" },
    { "release", (PyCFunction)thunk_release, METH_NOARGS,
      "free the thunk; its address traps from now on. Waits for calls from Python "
      "in other threads; from inside a call of this thunk, takes effect when that "
      "call returns" },
    { "_needs_resolve", (PyCFunction)thunk_needs_resolve, METH_VARARGS, NULL },
    { "_inline_layout", (PyCFunction)thunk_inline_layout, METH_NOARGS,
      "where compiled code finds the bound values: (cell, values, slots)" },
    { "__enter__", (PyCFunction)thunk_enter, METH_NOARGS, NULL },
    { "__exit__", (PyCFunction)thunk_exit, METH_VARARGS, NULL },
    { NULL, NULL, 0, NULL },
};

static PyMemberDef thunk_members[] = {
    { "__weaklistoffset__", T_PYSSIZET, offsetof(ThunkObject, weakreflist), READONLY, NULL },
    { NULL, 0, 0, 0, NULL },
};

static PyType_Slot thunk_slots[] = {
    { Py_tp_dealloc, thunk_dealloc },
    { Py_tp_call, thunk_call },
    { Py_tp_doc,
      "Thunk(signature, address, args, owner=None, nogil=True, memviews=None, "
      "engine=None, via=None)" },
    { Py_tp_traverse, thunk_traverse },
    { Py_tp_clear, thunk_clear },
    { Py_tp_members, thunk_members },
    { Py_tp_getset, thunk_getset },
    { Py_tp_methods, thunk_methods },
    { Py_tp_new, thunk_new },
    { 0, NULL },
};

/* Variable-size: one binding per target parameter after the fixed part. */
static PyType_Spec thunk_spec = {
    "numthunk._core.Thunk",
    offsetof(ThunkObject, b),
    sizeof(binding),
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    thunk_slots,
};

int nt_thunk_add(PyObject *module, nt_state *st)
{
    nt_fork_watch(); /* calls in flight are counted again in a child */
    PyObject *type = PyType_FromModuleAndSpec(module, &thunk_spec, NULL);
    if (type == NULL)
        return -1;
    st->thunk_type = (PyTypeObject *)type;
    return PyModule_AddObjectRef(module, "Thunk", type);
}
