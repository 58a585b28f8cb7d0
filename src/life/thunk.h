/*
 * Internal header of the Thunk type: the object and the structs its life
 * runs over, shared by python/thunk.c (the Python type) and life/commit.c (creation,
 * rebind, the dependency graph, teardown). docs/architecture.md describes
 * the states these fields carry and who may change them.
 *
 * Place in the pipeline: life: shared by life/commit.c and the Python
 * boundary (python/).
 */
#ifndef NUMTHUNK_THUNK_H
#define NUMTHUNK_THUNK_H

#include "python/pyapi.h"

/* One bound parameter. */
typedef struct {
    PyObject *value; /* what is bound (NULL where forwarded) */
    nt_held *held;   /* the buffer held for it, if any */
    uint64_t key;    /* layout key of the buffer it reads, 0 if none */
} binding;

typedef struct thunk_object ThunkObject;

/* A thunk this one depends on, and why. */
#define DEP_TARGET   (-1) /* its target */
#define DEP_DECLARED (-2) /* its target's Function.depends */
typedef struct {
    ThunkObject *thunk; /* a strong reference */
    int param;          /* DEP_*, or the bound function-pointer parameter */
    int at;             /* this thunk's index in thunk's users, -1 if none */
} dep;

/* A thunk that depends on this one. */
typedef struct {
    ThunkObject *thunk; /* weak: it leaves before it goes */
    int dep;            /* the index of this edge in thunk's deps */
} user;

/* What most thunks never need, allocated on first use. */
typedef struct {
    PyObject *csig;       /* the thunk's own Signature */
    PyObject *numba_type; /* Numba's type of this function value */
    nt_call *call;        /* for __call__, once prepared */
    int fwd_functions;    /* a forwarded parameter is a function pointer */
    nt_mvspec *mvspecs;   /* nargs, for __Pyx_memviewslice parameters */
    PyObject **retired;   /* values replaced by rebind(), until reclaim() */
    Py_ssize_t nretired, capretired;
    nt_held *retired_held; /* their buffers */
    dep *deps;             /* the thunks this one depends on now */
    int ndeps, capdeps;
    user *users; /* the thunks that depend on this one now */
    int nusers, capusers;
    uint64_t mark;  /* graph walks: visited in walk number `mark`, */
    int mark_chain; /*  at this depth */
} extra;

struct thunk_object {
    PyObject_VAR_HEAD        /* ob_size: the target's parameter count */
    nt_SignatureObject *sig; /* the target's signature */
    PyObject *owner;         /* keeps the target's code alive */
    nt_plan *plan;           /* lives until dealloc (rebind reads it) */
    nt_entry_ref entry;      /* the entry and the engine that made it */
    void *address;
    nt_ctx *ctx; /* the published context */
    extra *x;
    PyObject *weakreflist;
    int32_t inflight;     /* calls from Python in progress */
    uint32_t gen;         /* bumped by every published rebind */
    uint16_t chain;       /* longest path of thunks below this one */
    uint16_t chain_limit; /* the least chain_limit of the engines on it */
    uint16_t fork_gen;    /* the fork generation inflight counts in */
    uint64_t released_at; /* the quarantine clock when its entry went */
    uint16_t nogil : 1,   /* calls from Python may release the GIL: */
        own_nogil : 1,    /*   the target says so, */
        gil_values : 1,   /*   no bound function needs it, none below */
        released : 1, torn : 1, reclaim_pending : 1, plan_owned : 1,
        broken : 1,     /* a thunk below was released */
        fn_bound : 1,   /* a function-pointer parameter is bound */
        ctx_inline : 1; /* the first context is in the object */
    binding b[];
    /* then, at nt_thunk_ctx_offset: the first context, whose target word
       is the thunk's target for the object's life; or, where that room is
       not 16-aligned, a pointer to the first context, allocated */
};

/* Where the first context's room starts: after all of the object (a
   subclass without __slots__ keeps its __dict__ pointer after the
   bindings), rounded to 16. A type assigned to __class__ has the same
   sizes, so the offset holds for the object's life. */
static inline size_t nt_thunk_ctx_offset(PyTypeObject *type, Py_ssize_t nargs)
{
    size_t size = (size_t)type->tp_basicsize + (size_t)nargs * (size_t)type->tp_itemsize;
    return (size + 15) & ~(size_t)15;
}

/* The first context (kept until the object goes: rebind retires it, but
   teardown and reclaim leave its memory), NULL before creation made it. */
static inline nt_ctx *nt_thunk_first_ctx(const ThunkObject *t)
{
    char *room = (char *)t + nt_thunk_ctx_offset(Py_TYPE(t), Py_SIZE(t));
    return t->ctx_inline ? (nt_ctx *)room : *(nt_ctx **)room;
}

/* The target's address (its first context's target word). */
static inline void *nt_thunk_target(const ThunkObject *t)
{
    return nt_thunk_first_ctx(t)->target;
}

/* Where refusals about released thunks send the reader. */
#define SEE_LIFETIME " (see docs/lifetime.md)"

/* Released, or a thunk below it is: a call from Python raises. */
#define NT_UNUSABLE(t) ((t)->released || (t)->broken)

/* ---- python/thunk.c ---- */

/* The thunk's own Signature (its forwarded parameters), new reference. */
PyObject *nt_thunk_csig(ThunkObject *self);

/* ---- life/commit.c ---- */

/* The thunk's extra block, allocated on first use (NULL: MemoryError). */
extra *nt_thunk_extra(ThunkObject *self);
/* The memoryview declaration of parameter i, NULL if none. */
const nt_mvspec *nt_thunk_mvspec(ThunkObject *self, int i);
/* ValueError "the thunk has been released" if it is: -1, else 0. */
int nt_thunk_released_error(ThunkObject *self);
/* ValueError: what (a parameter, the target...) is the thunk d, which is
   released or uses a released one; verb: what the caller may do instead. */
int nt_thunk_refuse_released(const char *what, ThunkObject *d, const char *verb);
/* The ValueError of a call from Python of a thunk that is released, or
   that uses one; -1. */
int nt_thunk_unusable_error(ThunkObject *self);
/* The thunk at address p, bound as the target of a thunk of target
   signature sig (param DEP_TARGET) or to its function-pointer parameter
   param: the thunk `carried` (the one the value's spelling carries) when
   its address is p, else the registry's. 0 with *out the thunk or NULL (no
   thunk's); -1 with an exception when p is the address of a thunk being
   collected or collected, or a live thunk's of another signature. */
int nt_thunk_identify(const void *p, PyObject *carried, const nt_sig *sig, int param,
                      ThunkObject **out);
/* The owner of a function-pointer value (an Address marker: the thunk its
   spelling carries, if it is one), NULL for any other value. */
static inline PyObject *nt_address_owner(PyObject *v)
{
    return nt_is_address(v) ? ((nt_AddressObject *)v)->owner : NULL;
}
/* A new number for a walk of the graph (extra.mark). */
uint64_t nt_thunk_walk(void);
/* Frees the contexts and buffers rebind() retired. */
void nt_thunk_reclaim_now(ThunkObject *self);
/* Marks the thunk released (and every thunk that uses it broken). */
void nt_thunk_mark_released(ThunkObject *self);
/* The address traps from now on; contexts, buffers, bound values and
   dependencies go. Only with no call from Python in flight. Idempotent. */
void nt_thunk_teardown(ThunkObject *self);
/* rebind() of bound parameter i to value: 0, or -1 with an exception. */
int nt_thunk_rebind(ThunkObject *self, int i, PyObject *value);

/* What Thunk(...) is made of, parsed (python/thunk.c) or read from a
   Function (python/binder.c). */
typedef struct {
    nt_SignatureObject *sig;
    PyObject *address, *owner, *memviews, *engine, *via;
    PyObject *carried; /* the thunk the target's spelling carries, or None */
    int nogil;
    PyObject *const *values; /* borrowed, held by the caller */
    Py_ssize_t nvalues;
} nt_new_args;

/* Thunk(...) from its parsed arguments, under the state lock. */
PyObject *nt_thunk_make(PyTypeObject *type, nt_new_args *a);

#endif /* NUMTHUNK_THUNK_H */
