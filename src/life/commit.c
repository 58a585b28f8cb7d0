/*
 * The thunk's life over plain C structs (src/life/thunk.h): creation, rebind's
 * resolve and commit, the dependency graph, reclaim and teardown. The
 * Python type that drives them (methods, getters, slots, __call__) is in
 * python/thunk.c; docs/architecture.md describes the states and who changes them.
 *
 * Every state change follows "resolve, then commit": values are converted
 * first (their __index__/__float__ may run Python code, which may release,
 * rebind or drop this thunk), then the state is checked again and the
 * change published by C code that runs no Python code. Values the C
 * converter does not know (ctypes/cffi objects, arr.ctypes, Functions and
 * thunks for function pointers, ref() cells) are turned into ones it knows
 * by the Python package before any of this starts.
 *
 * A bound buffer stays pinned (a held Py_buffer, or for a NumPy array the
 * binding's reference) for as long as a context that points into it may
 * be read: until release(), or reclaim() for contexts retired by rebind().
 *
 * Thunks that use thunks. A thunk depends on the thunks its calls reach:
 * its target when that is a thunk's address, each bound function-pointer
 * value that is one, and those its target declares (Function.depends, for
 * code that calls thunks the core cannot see). A spelling that carries its
 * thunk is that thunk; a bare address is found in the registry
 * (life/registry.c), of the signature it is bound as (nt_thunk_identify). A thunk
 * holds what it depends on (strong references) and is listed, weakly, in
 * each of them as a user; from that graph come the chain depth (bounded,
 * so a call cannot overflow the C stack), the GIL need (a target that
 * needs it makes every thunk above it keep it), and `broken`: a thunk
 * below was released, so a call from Python raises instead of reaching the
 * released thunk's trap. A thunk never depends on itself: a bind or rebind
 * that would close a cycle is refused.
 *
 * Place in the pipeline: life: above the engines and the conversion, below
 * the Python type (python/thunk.c) that calls it.
 */
#include "life/thunk.h"
#include "life/quarantine.h"

#include <stdlib.h>
#include <string.h>

extra *nt_thunk_extra(ThunkObject *self)
{
    if (self->x == NULL) {
        self->x = PyMem_Calloc(1, sizeof(extra));
        if (self->x == NULL)
            PyErr_NoMemory();
    }
    return self->x;
}

const nt_mvspec *nt_thunk_mvspec(ThunkObject *self, int i)
{
    if (self->x == NULL || self->x->mvspecs == NULL || self->x->mvspecs[i].ndim == 0)
        return NULL;
    return &self->x->mvspecs[i];
}

int nt_thunk_released_error(ThunkObject *self)
{
    if (self->released) {
        PyErr_SetString(PyExc_ValueError, "the thunk has been released" SEE_LIFETIME);
        return -1;
    }
    return 0;
}

/* ---- the dependency graph ---- */

/* "double (void) over double (const double *, int), target at 0x..." */
static void describe(ThunkObject *t, char *buf, size_t n)
{
    nt_what *what = nt_plan_what(t->plan, nt_thunk_target(t));
    PyOS_snprintf(buf, n, "%s, target at %p", what != NULL ? what->text : "a thunk",
                  nt_thunk_target(t));
}

/* Where a dependency comes from, for messages. */
static void dep_label(ThunkObject *self, int param, char *buf, size_t n)
{
    if (param == DEP_TARGET)
        PyOS_snprintf(buf, n, "the target");
    else if (param == DEP_DECLARED)
        PyOS_snprintf(buf, n, "a thunk the target declares it uses (Function.depends)");
    else
        nt_param_label(self->sig->sig, param, buf, n);
}

/* The released thunk t is, or that t uses (t released or broken). */
static ThunkObject *released_below(ThunkObject *t)
{
    while (!t->released) {
        ThunkObject *next = NULL;
        for (int k = 0; t->x != NULL && k < t->x->ndeps && next == NULL; k++) {
            ThunkObject *d = t->x->deps[k].thunk;
            if (d->released || d->broken)
                next = d;
        }
        if (next == NULL)
            break;
        t = next;
    }
    return t;
}

/* ValueError: what (a parameter, the target...) is the thunk d, which is
   released or uses a released one. */
int nt_thunk_refuse_released(const char *what, ThunkObject *d, const char *verb)
{
    char desc[NT_WHAT_MAX + 40];
    ThunkObject *r = released_below(d);
    describe(r, desc, sizeof(desc));
    if (r == d)
        PyErr_Format(PyExc_ValueError,
                     "%s is a released thunk (%s); %s a live thunk (a released thunk's "
                     "address traps when called)" SEE_LIFETIME,
                     what, desc, verb);
    else
        PyErr_Format(PyExc_ValueError,
                     "%s uses a released thunk (%s), which would trap when called; %s a "
                     "thunk whose dependencies are live" SEE_LIFETIME,
                     what, desc, verb);
    return -1;
}

/* A call from Python of a thunk that is released, or that uses one. */
int nt_thunk_unusable_error(ThunkObject *self)
{
    if (self->released)
        return nt_thunk_released_error(self);
    for (int k = 0; self->x != NULL && k < self->x->ndeps; k++) {
        dep *d = &self->x->deps[k];
        if (d->thunk->released || d->thunk->broken) {
            char what[300], desc[NT_WHAT_MAX + 40];
            dep_label(self, d->param, what, sizeof(what));
            describe(released_below(d->thunk), desc, sizeof(desc));
            /* Only a parameter can be rebound; the target and the thunks
               it declares are fixed at bind. */
            const char *remedy = d->param == DEP_TARGET
                ? "a target cannot be rebound: bind a new thunk over a live one"
                : d->param == DEP_DECLARED
                ? "a declared dependency cannot be rebound: bind a new thunk over a "
                  "Function whose depends= names live thunks"
                : "rebind that parameter, or bind again with live thunks";
            PyErr_Format(PyExc_ValueError,
                         "this thunk uses a released thunk (%s) through %s: a call would "
                         "reach the released thunk's trap; %s" SEE_LIFETIME,
                         desc, what, remedy);
            return -1;
        }
    }
    PyErr_SetString(PyExc_ValueError, "this thunk uses a released thunk" SEE_LIFETIME);
    return -1;
}

/* items (a PyMem array of `size`-byte items, *cap of them) with room for
   need: the array, moved maybe, or NULL with MemoryError (items intact). */
static void *room(void *items, int *cap, int need, size_t size)
{
    if (need <= *cap && items != NULL)
        return items;
    int ncap = Py_MAX(4, 2 * need);
    void *grown = PyMem_Realloc(items, (size_t)ncap * size);
    if (grown == NULL)
        return PyErr_NoMemory();
    *cap = ncap;
    return grown;
}

/* Room in d's users for one more. */
static int reserve_user(ThunkObject *d)
{
    extra *x = nt_thunk_extra(d);
    user *u = x != NULL ? room(x->users, &x->capusers, x->nusers + 1, sizeof(user)) : NULL;
    if (u == NULL)
        return -1;
    x->users = u;
    return 0;
}

/* Lists self as a user of its dependency k (room reserved). */
static void link_user(ThunkObject *self, int k)
{
    dep *e = &self->x->deps[k];
    extra *x = e->thunk->x;
    x->users[x->nusers] = (user){ self, k };
    e->at = x->nusers++;
}

/* Takes self off the users of its dependency k: the last user moves into
   its place, and that user's edge follows. */
static void unlink_user(ThunkObject *self, int k)
{
    dep *e = &self->x->deps[k];
    if (e->at < 0)
        return;
    extra *x = e->thunk->x;
    user last = x->users[--x->nusers];
    if (e->at != x->nusers) {
        x->users[e->at] = last;
        last.thunk->x->deps[last.dep].at = e->at;
    }
    e->at = -1;
}

/* Room in self's dependencies for n more. */
static int reserve_deps(ThunkObject *self, int n)
{
    extra *x = nt_thunk_extra(self);
    dep *d = x != NULL ? room(x->deps, &x->capdeps, x->ndeps + n, sizeof(dep)) : NULL;
    if (d == NULL)
        return -1;
    x->deps = d;
    return 0;
}

/* t was released: every thunk that uses it, at any level, is broken. */
static void break_users(ThunkObject *t)
{
    for (int k = 0; t->x != NULL && k < t->x->nusers; k++) {
        ThunkObject *u = t->x->users[k].thunk;
        if (!NT_UNUSABLE(u)) {
            u->broken = 1;
            break_users(u);
        }
    }
}

/* What a thunk takes from those it uses, recomputed after one of them
   changed; the thunks above follow when it changes. */
static void refresh(ThunkObject *t)
{
    int chain = 0, limit = t->entry.engine->chain_limit;
    int nogil = t->own_nogil && !t->gil_values, broken = 0;
    for (int k = 0; t->x != NULL && k < t->x->ndeps; k++) {
        ThunkObject *d = t->x->deps[k].thunk;
        chain = Py_MAX(chain, d->chain + 1);
        limit = Py_MIN(limit, (int)d->chain_limit);
        nogil &= d->nogil;
        broken |= NT_UNUSABLE(d);
    }
    if (chain == t->chain && limit == t->chain_limit && nogil == t->nogil && broken == t->broken)
        return;
    t->chain = (uint16_t)chain;
    t->chain_limit = (uint16_t)limit;
    t->nogil = nogil;
    t->broken = broken;
    for (int k = 0; t->x != NULL && k < t->x->nusers; k++)
        refresh(t->x->users[k].thunk);
}

/* Whether `from` is `to` or uses it, at any level. Each walk has its own
   number, so a thunk reached twice is walked once. */
static uint64_t walks;

uint64_t nt_thunk_walk(void)
{
    return ++walks;
}

static int uses(ThunkObject *from, ThunkObject *to, uint64_t walk)
{
    if (from == to)
        return 1;
    extra *x = from->x;
    if (x == NULL || x->ndeps == 0 || x->mark == walk)
        return 0;
    x->mark = walk;
    for (int k = 0; k < x->ndeps; k++)
        if (uses(x->deps[k].thunk, to, walk))
            return 1;
    return 0;
}

/* "libffi: 128, native-x86_64-sysv: 1024": how deep each engine's thunks
   may nest. */
static void chain_limits(char *buf, size_t n)
{
    const nt_engine *native = nt_engine_native;
    int len = snprintf(buf, n, "%s: %d", nt_engine_ffi.name, nt_engine_ffi.chain_limit);
    if (native != NULL && (size_t)len < n) /* a failed snprintf's -1 is no length below n */
        snprintf(buf + len, n - (size_t)len, ", %s: %d", native->name, native->chain_limit);
}

static int chain_error(int levels, int limit)
{
    char limits[160];
    chain_limits(limits, sizeof(limits));
    PyErr_Format(PyExc_ValueError,
                 "this would make a chain of %d thunks, each calling the next (as its "
                 "target, through a bound function pointer or a declared dependency); "
                 "composed thunks may nest at most %d levels on the engines in this chain "
                 "(%s; each level calls the next, and a deeper chain could overflow a "
                 "thread's C stack)",
                 levels, limit, limits);
    return -1;
}

/* The limit that t, or a thunk above it, would go past when t's depth
   becomes chain and the least limit of the engines at or below it limit;
   0 when every one stays within its limit. A thunk reached again in the
   same walk, no deeper, is not walked again: the limit reaching a thunk x
   is the least of limit and x->chain_limit whatever the path (x's own
   limit is already the least of every thunk between), so a second path
   brings no less room. */
static int limit_passed(ThunkObject *t, int chain, int limit, uint64_t walk)
{
    if (chain + 1 > limit)
        return limit;
    extra *x = t->x;
    if ((chain <= t->chain && limit >= t->chain_limit) || x == NULL)
        return 0; /* nothing above t changes */
    if (x->mark == walk && chain <= x->mark_chain)
        return 0;
    x->mark = walk;
    x->mark_chain = chain;
    for (int k = 0; k < x->nusers; k++) {
        ThunkObject *u = x->users[k].thunk;
        int passed = limit_passed(u, chain + 1, Py_MIN(limit, (int)u->chain_limit), walk);
        if (passed > 0)
            return passed;
    }
    return 0;
}

/* Where a value is bound, for a refusal: "the target" (param DEP_TARGET)
   or parameter param's label. */
static void bound_where(const nt_sig *sig, int param, char *buf, size_t n)
{
    if (param == DEP_TARGET)
        PyOS_snprintf(buf, n, "the target");
    else
        nt_param_label(sig, param, buf, n);
}

/* The thunk whose entry is at address p, bound as the target of a thunk of
   target signature sig (param DEP_TARGET) or to its function-pointer
   parameter param, so of signature sig or of that parameter's. A spelling
   that carries its thunk (the thunk itself, t.ctypes, a capsule, owner=:
   the package hands it over as `carried`) is that thunk whenever its
   address is p, released or not, and is never looked up again by address
   (which a new thunk may have taken after the quarantine); a bare address
   is looked up. 0 with *out the thunk (borrowed; check_dep judges a
   released one) or NULL where p is no thunk's; -1 with an exception where
   p is a thunk's that is being collected or was collected (its address
   still in the quarantine), or a live thunk's of another signature. The
   refusal's label is made only when it is raised. */
int nt_thunk_identify(const void *p, PyObject *carried, const nt_sig *sig, int param,
                      ThunkObject **out)
{
    const nt_sig *want = param == DEP_TARGET ? sig : sig->args[param].fn;
    char what[300];
    ThunkObject *d = NULL;
    *out = NULL;
    if (carried != NULL && PyObject_TypeCheck(carried, nt_get_state()->thunk_type)
        && ((ThunkObject *)carried)->address == p) {
        d = (ThunkObject *)carried;
    } else {
        int collected;
        d = nt_registry_find(p, &collected);
        if (collected) {
            bound_where(sig, param, what, sizeof(what));
            PyErr_Format(PyExc_ValueError,
                         "%s is the address %p of a thunk that was released and collected "
                         "(the address still traps); bind a live thunk, and keep it for as "
                         "long as its address is used" SEE_LIFETIME,
                         what, p);
            return -1;
        }
        /* Freed now: its last reference went, and Python code (a weakref
           callback, a finalizer) runs before the registry lets it go. */
        if (d != NULL && Py_REFCNT(d) == 0) {
            bound_where(sig, param, what, sizeof(what));
            PyErr_Format(PyExc_ValueError,
                         "%s is the address %p of a thunk being collected (its last "
                         "reference is gone); bind a live thunk" SEE_LIFETIME,
                         what, p);
            return -1;
        }
    }
    if (d != NULL && !d->released) {
        PyObject *csig = nt_thunk_csig(d);
        if (csig == NULL)
            return -1;
        int same = nt_sig_equal(((nt_SignatureObject *)csig)->sig, want);
        if (!same) {
            char text[300];
            nt_mark_cut(text, sizeof(text), nt_sig_format(want, text, sizeof(text)));
            bound_where(sig, param, what, sizeof(what));
            PyErr_Format(PyExc_TypeError,
                         "%s is a thunk (at %p) of signature '%S', not '%s': a call "
                         "through it would pass the wrong arguments; give a function of "
                         "the signature declared, or declare the thunk's own",
                         what, p, csig, text);
        }
        Py_DECREF(csig);
        if (!same)
            return -1;
    }
    *out = d;
    return 0;
}

/* The longest path of thunks above t: 0 when nothing uses t. Each thunk
   is measured once a walk (mark_chain keeps its height), so a graph of
   many paths costs one visit a thunk. */
static int height_above(ThunkObject *t, uint64_t walk)
{
    extra *x = t->x;
    if (x == NULL || x->nusers == 0)
        return 0;
    if (x->mark == walk)
        return x->mark_chain;
    int height = 0;
    for (int k = 0; k < x->nusers; k++)
        height = Py_MAX(height, 1 + height_above(x->users[k].thunk, walk));
    x->mark = walk;
    x->mark_chain = height;
    return height;
}

/* ValueError unless t, and every thunk above it, stays within the chain
   limit when t's depth becomes chain: the refusal names the depth the
   whole result would have, t's new chain and the longest path above it,
   not the level where the walk up first went past a limit. */
static int within_limit(ThunkObject *t, int chain, int limit)
{
    int passed = limit_passed(t, chain, limit, ++walks);
    if (passed == 0)
        return 0;
    return chain_error(chain + 1 + height_above(t, ++walks), passed);
}

/* ValueError unless d, found where `what` points (the target, a bound
   value), may be used by self: live, with live dependencies, and neither
   self nor a thunk that uses self. address: what is bound there. */
static int check_dep(ThunkObject *self, const void *address, ThunkObject *d, const char *what,
                     const char *verb)
{
    if (address != NULL && address == self->address) {
        PyErr_Format(PyExc_ValueError,
                     "%s is this thunk's own address: a call would call itself for ever", what);
        return -1;
    }
    if (d == NULL)
        return 0;
    if (NT_UNUSABLE(d))
        return nt_thunk_refuse_released(what, d, verb);
    if (uses(d, self, ++walks)) {
        PyErr_Format(PyExc_ValueError,
                     "%s is a thunk that uses this one (directly or through others): "
                     "binding it would make a cycle, and a call would never return",
                     what);
        return -1;
    }
    return 0;
}

/* ---- teardown ---- */

/* Frees the contexts and buffers rebind() retired. Everything is detached
   from the thunk before anything is released: releasing a buffer or a
   reference may run Python code, which then sees a consistent thunk. */
void nt_thunk_reclaim_now(ThunkObject *self)
{
    NT_TSAN_SYNC();
    nt_ctx *older = NULL;
    if (self->ctx != NULL) {
        older = self->ctx->older;
        self->ctx->older = NULL;
    }
    PyObject **objs = NULL;
    Py_ssize_t n = 0;
    nt_held *held = NULL;
    if (self->x != NULL) {
        objs = self->x->retired;
        n = self->x->nretired;
        held = self->x->retired_held;
        self->x->retired = NULL;
        self->x->nretired = self->x->capretired = 0;
        self->x->retired_held = NULL;
    }
    if (older == NULL && objs == NULL && held == NULL)
        return; /* nothing retired: the common teardown */
    nt_ctx_free_chain(older, nt_thunk_first_ctx(self));
    nt_held_release(held);
    for (Py_ssize_t k = 0; k < n; k++)
        Py_DECREF(objs[k]);
    PyMem_Free(objs);
}

/* Marks the thunk released: calls from Python of every thunk that uses it
   raise from now on. */
void nt_thunk_mark_released(ThunkObject *self)
{
    NT_TSAN_SYNC();
    if (!self->released) {
        self->released = 1;
        break_users(self);
    }
}

/* The address traps from now on (naming the thunk); contexts, buffers,
   bound values and dependencies go. Only with no call from Python in
   flight. Idempotent. */
void nt_thunk_teardown(ThunkObject *self)
{
    NT_TSAN_SYNC();
    if (self->torn)
        return;
    nt_thunk_mark_released(self);
    self->torn = 1;
    if (self->entry.entry != NULL) { /* none yet: creation failed before */
        nt_entry_free(&self->entry, nt_plan_what(self->plan, nt_thunk_target(self)));
        self->released_at = nt_quarantine_clock(); /* this release's stamp */
    }
    nt_thunk_reclaim_now(self);
    /* NULL is published (release) before the context goes: a Numba
       inlined call that loads the cell from now on traps instead of
       reading freed cells (docs/architecture.md, memory ordering). */
    nt_ctx *ctx = self->ctx;
    nt_atomic_store_ptr(&self->ctx, NULL, NT_RELEASE);
    nt_ctx_free_chain(ctx, nt_thunk_first_ctx(self));
    /* what it used: detached from the graph first, then let go */
    dep *deps = NULL;
    int ndeps = 0;
    if (self->x != NULL) {
        deps = self->x->deps;
        ndeps = self->x->ndeps;
        for (int k = 0; k < ndeps; k++)
            unlink_user(self, k);
        self->x->deps = NULL;
        self->x->ndeps = self->x->capdeps = 0;
    }
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++) {
        nt_held *h = self->b[i].held;
        self->b[i].held = NULL;
        self->b[i].key = 0;
        nt_held_release(h);
        Py_CLEAR(self->b[i].value);
    }
    for (int k = 0; k < ndeps; k++)
        Py_DECREF(deps[k].thunk);
    PyMem_Free(deps);
}

/* ---- creation ---- */

/* memviews: {index: (type_text, ndim, contig, const)}, or None
   (python/memviews.c reads them). */
static int collect_mvspecs(ThunkObject *self, PyObject *memviews)
{
    nt_mvspec *specs;
    if (nt_mvspecs_read(self->sig->sig, memviews, &specs) < 0)
        return -1;
    if (specs == NULL)
        return 0;
    extra *x = nt_thunk_extra(self);
    if (x == NULL) {
        PyMem_Free(specs);
        return -1;
    }
    x->mvspecs = specs;
    return 0;
}

/* The argument count against the signature. */
static int check_values(const nt_sig *sig, Py_ssize_t nvalues)
{
    if (nvalues != sig->nargs) {
        char text[512];
        nt_mark_cut(text, sizeof(text), nt_sig_format(sig, text, sizeof(text)));
        PyErr_Format(PyExc_TypeError,
                     "the target '%s' takes %d argument%s, got %zd "
                     "(pass numthunk.ARG for each parameter the thunk forwards)",
                     text, sig->nargs, sig->nargs == 1 ? "" : "s", nvalues);
        return -1;
    }
    if (sig->ret.kind == NT_MEMVIEW) {
        PyErr_SetString(PyExc_TypeError, "targets returning a memoryview slice are not supported");
        return -1;
    }
    return 0;
}

/* The plan for the binding pattern of values: *plan, NULL with *err set
   if there is none (reported once the memoryview declarations are
   checked, as the thunk object is made before). -1: MemoryError. */
static int take_plan(nt_SignatureObject *sigobj, PyObject *const *values, const nt_engine *wanted,
                     nt_plan **plan, int *owned, nt_error *err)
{
    const nt_sig *sig = sigobj->sig;
    uint8_t small[64];
    uint8_t *pattern = sig->nargs <= 64 ? small : PyMem_Malloc((size_t)sig->nargs);
    if (pattern == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < sig->nargs; i++)
        pattern[i] = values[i] == NT_ARG;
    *owned = 0;
    *plan = nt_signature_plan(sigobj, pattern, wanted, owned, err);
    if (pattern != small)
        PyMem_Free(pattern);
    return 0;
}

/* The thunk object, all zero but its header, with room after it for the
   plan's first context (none without a plan). Not tracked by the
   collector until complete: nothing can reach it while its values are
   converted. */
static ThunkObject *new_object(PyTypeObject *type, Py_ssize_t nargs, const nt_plan *plan)
{
    size_t at = nt_thunk_ctx_offset(type, nargs);
    size_t room = plan != NULL ? nt_ctx_size(plan) : sizeof(nt_ctx *);
    size_t item = (size_t)type->tp_itemsize, base = (size_t)type->tp_basicsize;
    Py_ssize_t items = (Py_ssize_t)((at + room - base + item - 1) / item);
    ThunkObject *self = PyObject_GC_NewVar(ThunkObject, type, items);
    if (self == NULL)
        return NULL;
    NT_TSAN_SYNC();           /* the memory may be a freed thunk's */
    Py_SET_SIZE(self, nargs); /* the bindings; the rest is the room */
    memset((char *)self + sizeof(PyVarObject), 0, at + room - sizeof(PyVarObject));
    self->ctx_inline = plan != NULL && ((uintptr_t)self + at) % 16 == 0;
    return self;
}

/* The first context, in the object's room or allocated (its pointer in
   the room); NULL with err set. */
static nt_ctx *first_ctx(ThunkObject *self, void *target, nt_error *err)
{
    char *room = (char *)self + nt_thunk_ctx_offset(Py_TYPE(self), Py_SIZE(self));
    if (self->ctx_inline) {
        nt_ctx_init((nt_ctx *)room, self->plan, target);
        return (nt_ctx *)room;
    }
    return *(nt_ctx **)room = nt_ctx_new(self->plan, target, err);
}

/* The declared dependencies (via): None, a thunk, or a tuple of thunks
   (Function.depends). */
static int check_via(PyObject *via)
{
    if (via == NULL || via == Py_None)
        return 0;
    if (PyTuple_Check(via)) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(via); k++) {
            PyObject *d = PyTuple_GET_ITEM(via, k);
            if (!PyObject_TypeCheck(d, nt_get_state()->thunk_type)) {
                PyErr_Format(PyExc_TypeError,
                             "the thunks a target uses (Function.depends, Thunk(via=...)) "
                             "must be thunks; item %zd is of type %.100s",
                             k, Py_TYPE(d)->tp_name);
                return -1;
            }
        }
        return 0;
    }
    if (PyObject_TypeCheck(via, nt_get_state()->thunk_type))
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "Thunk(via=...) takes the thunks the target uses: a thunk or a tuple of "
                 "thunks (Function.depends), got %.100s",
                 Py_TYPE(via)->tp_name);
    return -1;
}

/* The function pointer bound at parameter i, if one is: its address, and
   whether it was declared to need the GIL. */
static void *bound_function(ThunkObject *self, int i, int *needs_gil)
{
    PyObject *v = self->b[i].value;
    *needs_gil = 0;
    if (self->sig->sig->args[i].kind != NT_FNPTR || v == NULL || !nt_is_address(v))
        return NULL;
    *needs_gil = ((nt_AddressObject *)v)->needs_gil;
    return (void *)((nt_AddressObject *)v)->value;
}

/* Whether a bound function that is not a thunk was declared to need the
   GIL (address(..., nogil=False)); a thunk's own need counts through its
   dependency, however its address was spelled. */
static int gil_of_values(ThunkObject *self)
{
    for (int i = 0; i < Py_SIZE(self); i++) {
        int needs_gil, is_thunk = 0;
        if (bound_function(self, i, &needs_gil) == NULL || !needs_gil)
            continue;
        for (int k = 0; self->x != NULL && k < self->x->ndeps; k++)
            is_thunk |= self->x->deps[k].param == i;
        if (!is_thunk)
            return 1;
    }
    return 0;
}

/* d held as one more of self's dependencies, in room reserved (not yet
   listed among d's users: link_user does that). */
static void push_dep(ThunkObject *self, ThunkObject *d, int param)
{
    extra *x = self->x;
    x->deps[x->ndeps] = (dep){ (ThunkObject *)Py_NewRef(d), param, -1 };
    x->ndeps++;
}

/* push_dep with its room. -1 with no memory. */
static int add_dep(ThunkObject *self, ThunkObject *d, int param)
{
    if (reserve_deps(self, 1) < 0)
        return -1;
    push_dep(self, d, param);
    return 0;
}

/* What a new thunk uses, found before its values are converted (their
   __index__ or __float__ may release any of them, or drop the last
   reference to one): its target if that is a thunk's address, each bound
   function-pointer value that is one, and the declared ones (via). Each is
   held from here (a failure part way leaves those held so far to the
   thunk's release); link_deps checks them once nothing can change. */
static int gather_deps(ThunkObject *self, PyObject *const *values, PyObject *via, PyObject *carried)
{
    const nt_sig *sig = self->sig->sig;
    ThunkObject *target;
    /* a target that is a thunk's address carries it, or is owned by it */
    if (carried == NULL || carried == Py_None)
        carried = self->owner;
    if (nt_thunk_identify(nt_thunk_target(self), carried, sig, DEP_TARGET, &target) < 0
        || (target != NULL && add_dep(self, target, DEP_TARGET) < 0))
        return -1;
    for (int i = 0; i < sig->nargs; i++) {
        PyObject *v = values[i];
        if (sig->args[i].kind != NT_FNPTR || v == NT_ARG)
            continue;
        self->fn_bound = 1;
        if (!nt_is_address(v))
            continue;
        ThunkObject *d;
        if (nt_thunk_identify((void *)((nt_AddressObject *)v)->value, nt_address_owner(v), sig, i,
                              &d)
                < 0
            || (d != NULL && add_dep(self, d, i) < 0))
            return -1;
    }
    Py_ssize_t ndeclared = via == NULL || via == Py_None ? 0
        : PyTuple_Check(via)                             ? PyTuple_GET_SIZE(via)
                                                         : 1;
    for (Py_ssize_t k = 0; k < ndeclared; k++) {
        PyObject *d = PyTuple_Check(via) ? PyTuple_GET_ITEM(via, k) : via;
        if (add_dep(self, (ThunkObject *)d, DEP_DECLARED) < 0)
            return -1;
    }
    return 0;
}

/* The new thunk's dependencies, checked now that its values are converted
   and its entry made (no Python code runs from here to the publication):
   none released, none closing a cycle; chain depth, its limit and the GIL
   follow from them, and it is listed as a user of each. */
static int link_deps(ThunkObject *self)
{
    const nt_sig *sig = self->sig->sig;
    extra *x = self->x;
    /* the entry's engine's limit: a native plan's entries are libffi
       closures once executable memory has run out */
    int limit = self->entry.engine->chain_limit;
    int ndeps = x != NULL ? x->ndeps : 0;
    char what[300];
    /* its own address among its values: a reused address, bound before */
    if (nt_thunk_target(self) == self->address)
        return check_dep(self, self->address, NULL, "the target", "bind");
    int gil = 0;
    for (int i = 0; i < sig->nargs && self->fn_bound; i++) {
        int needs_gil;
        void *p = bound_function(self, i, &needs_gil);
        gil |= needs_gil;
        if (p != NULL && p == self->address) {
            nt_param_label(sig, i, what, sizeof(what));
            return check_dep(self, p, NULL, what, "bind");
        }
    }
    if (ndeps == 0 && !gil) { /* a plain thunk: nothing below it */
        self->chain_limit = (uint16_t)limit;
        self->nogil = self->own_nogil;
        return 0;
    }
    int chain = 0, nogil = self->own_nogil;
    for (int k = 0; k < ndeps; k++) {
        ThunkObject *d = x->deps[k].thunk;
        if (NT_UNUSABLE(d)) {
            dep_label(self, x->deps[k].param, what, sizeof(what));
            return nt_thunk_refuse_released(what, d, "bind");
        }
        chain = Py_MAX(chain, d->chain + 1);
        limit = Py_MIN(limit, (int)d->chain_limit);
        nogil &= d->nogil;
    }
    self->gil_values = gil && gil_of_values(self);
    self->chain_limit = (uint16_t)limit;
    if (chain + 1 > limit)
        return chain_error(chain + 1, limit);
    self->chain = (uint16_t)chain;
    self->nogil = nogil && !self->gil_values;
    /* listed as a user of each (teardown undoes a part done) */
    for (int k = 0; k < ndeps; k++) {
        if (reserve_user(x->deps[k].thunk) < 0)
            return -1;
        link_user(self, k);
    }
    return 0;
}

static int convert_bound(ThunkObject *self, PyObject *const *values)
{
    const nt_sig *sig = self->sig->sig;
    for (int i = 0; i < sig->nargs; i++) {
        const nt_slot *s = &self->plan->slots[i];
        if (s->src != NT_SRC_BOUND)
            continue;
        PyObject *v = values[i];
        binding *b = &self->b[i];
        if (nt_convert(sig, i, v, self->ctx->values + s->offset, &b->held, nt_thunk_mvspec(self, i),
                       &b->key)
            < 0)
            return -1;
        b->value = Py_NewRef(v);
    }
    return 0;
}

/* Values the converter does not know go to the Python package's
   registered resolve_values first, before anything is made (for the
   package's thunk class and its subclasses). NULL: error; else a new
   reference to the values to bind. */
int nt_thunk_resolve(PyTypeObject *type, nt_SignatureObject *sigobj, PyObject *const *values,
                     Py_ssize_t n, PyObject *owner, PyObject **resolved)
{
    const nt_sig *sig = sigobj->sig;
    *resolved = NULL;
    for (Py_ssize_t i = 0; i < n && i < sig->nargs; i++) {
        PyObject *v = values[i];
        nt_kind kind = sig->args[i].kind;
        /* only pointers, function pointers and memoryviews take foreign
           objects (nt_needs_resolve) */
        if (v == NT_ARG || (kind != NT_PTR && kind != NT_FNPTR && kind != NT_MEMVIEW))
            continue;
        int need = nt_needs_resolve(&sig->args[i], v);
        if (need < 0)
            return -1;
        if (need) {
            nt_state *st = nt_get_state();
            if (!nt_state_hooks_for(st, type))
                return 0; /* the converter refuses them by name */
            PyObject *tuple = nt_tuple_of(values, n);
            if (tuple == NULL)
                return -1;
            PyObject *r =
                PyObject_CallFunctionObjArgs(st->resolve_values, (PyObject *)sigobj, tuple,
                                             owner != NULL ? owner : Py_None, NULL);
            Py_DECREF(tuple);
            if (r != NULL && (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != n)) {
                Py_DECREF(r);
                PyErr_SetString(
                    PyExc_TypeError,
                    "the package's resolve_values must return a tuple of the same length");
                return -1;
            }
            *resolved = r;
            return r != NULL ? 0 : -1;
        }
    }
    return 0;
}

PyObject *nt_thunk_create(PyTypeObject *type, nt_SignatureObject *sig, void *target,
                          PyObject *const *values, Py_ssize_t nvalues, PyObject *owner, int nogil,
                          PyObject *memviews, const nt_engine *wanted, PyObject *via,
                          PyObject *carried)
{
    if (check_values(sig->sig, nvalues) < 0 || check_via(via) < 0)
        return NULL;
    nt_error err;
    nt_error_init(&err);
    nt_plan *plan;
    int owned;
    if (take_plan(sig, values, wanted, &plan, &owned, &err) < 0)
        return NULL;
    ThunkObject *self = new_object(type, sig->sig->nargs, plan);
    if (self == NULL) {
        if (owned)
            nt_plan_free(plan);
        return NULL;
    }
    self->plan = plan;
    self->plan_owned = owned != 0;
    self->sig = (nt_SignatureObject *)Py_NewRef(sig);
    self->owner = Py_NewRef(owner != NULL ? owner : Py_None);
    self->own_nogil = nogil != 0;
    if (collect_mvspecs(self, memviews != NULL ? memviews : Py_None) < 0)
        goto error;
    if (plan == NULL)
        goto error_nt;
    self->ctx = first_ctx(self, target, &err);
    if (self->ctx == NULL)
        goto error_nt;
    if (gather_deps(self, values, via, carried) < 0 || convert_bound(self, values) < 0)
        goto error;
    NT_TSAN_SYNC();
    if (self->plan->engine->entry_new(self->plan, self->ctx, &self->entry, &self->address, &err)
        != NT_OK)
        goto error_nt;
    if (link_deps(self) < 0)
        goto error;
    NT_TSAN_SYNC(); /* conversion ran Python code */
    if (nt_registry_add(self, self->address) < 0) {
        PyErr_NoMemory();
        goto error;
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;

error_nt:
    nt_raise(&err);
error:
    Py_DECREF(self);
    return NULL;
}

/* A derived value that follows the rebound array (size(arr) bound beside
   arr): its parameter, its new marker and cell. */
typedef struct {
    int param;
    PyObject *marker; /* its new Derived marker (owned) */
    uint64_t cell;    /* its new cell */
    uint64_t key;     /* the layout key it reads */
} follower;

/* What a rebind prepares besides the new value itself: the followers and
   the context. */
typedef struct {
    int n;       /* followers */
    follower *f; /* room for one per parameter */
    nt_ctx *fresh;
} rebind_prep;

static void prep_discard(rebind_prep *p)
{
    for (int k = 0; k < p->n; k++)
        Py_CLEAR(p->f[k].marker);
    p->n = 0;
}

static void prep_free(rebind_prep *p)
{
    prep_discard(p);
    PyMem_Free(p->f);
    free(p->fresh);
}

/* Whether bound value p is a buffer that derived values may follow. */
static int holds_buffer(const ThunkObject *self, int p)
{
    PyObject *v = self->b[p].value;
    return v != NULL && !nt_is_derived(v) && self->b[p].key != 0;
}

static PyObject *array_of(PyObject *v)
{
    return nt_is_strided(v) ? ((nt_StridedObject *)v)->obj : v;
}

/* Whether parameter p holds a buffer a derived value may follow: of its
   array object obj itself, or (by_layout) of the layout key it was bound
   with. */
static int is_candidate(const ThunkObject *self, int p, int by_layout, uint64_t key,
                        const PyObject *obj)
{
    return holds_buffer(self, p)
        && (by_layout ? self->b[p].key == key : array_of(self->b[p].value) == obj);
}

/*
 * Which bound buffer the derived value at j (size(arr), shape, stride) was
 * bound beside, the one it follows when rebound; -1 for none. Candidates
 * are the buffers holding the marker's array object itself; if none does,
 * those reading the same memory with the same layout (the array bound in
 * another form: memoryview(arr), a ctypes array on it). Of several (the
 * same array bound to several parameters), the k-th derived value of a kind
 * (size, or shape/stride of one axis) pairs with the k-th candidate when
 * there are as many of each (x, n, y, m and n, m, x, y alike); otherwise
 * the nearest candidate before j, else the nearest after it.
 */
static int followed(const ThunkObject *self, int j)
{
    const nt_DerivedObject *d = (const nt_DerivedObject *)self->b[j].value;
    uint64_t key = self->b[j].key;
    int n = (int)Py_SIZE(self), by_layout = 1, count = 0;
    for (int p = 0; p < n; p++)
        if (is_candidate(self, p, 0, key, d->obj))
            by_layout = 0;
    for (int p = 0; p < n; p++)
        count += is_candidate(self, p, by_layout, key, d->obj);
    int rank = 0, peers = 0;
    for (int q = 0; q < n; q++) {
        PyObject *v = self->b[q].value;
        if (v == NULL || !nt_is_derived(v))
            continue;
        const nt_DerivedObject *e = (const nt_DerivedObject *)v;
        if (e->kind != d->kind || e->axis != d->axis /* every size() has axis 0 */
            || (by_layout ? self->b[q].key != key : e->obj != d->obj))
            continue;
        rank += q < j;
        peers++;
    }
    if (peers == count) /* j is a peer of its own: never for no candidate */
        for (int p = 0; p < n; p++)
            if (is_candidate(self, p, by_layout, key, d->obj) && rank-- == 0)
                return p;
    for (int p = j - 1; p >= 0; p--)
        if (is_candidate(self, p, by_layout, key, d->obj))
            return p;
    for (int p = j + 1; p < n; p++)
        if (is_candidate(self, p, by_layout, key, d->obj))
            return p;
    return -1;
}

/* Derived values bound beside the array parameter i holds now follow the
   new value. Runs no Python code of its own, but allocating a marker may
   start a collection (finalizers): the caller checks the thunk again after. */
static int prepare_followers(ThunkObject *self, int i, PyObject *value, uint64_t newkey,
                             rebind_prep *p)
{
    const nt_sig *sig = self->sig->sig;
    PyObject *source = array_of(value);
    for (int j = 0; j < sig->nargs && holds_buffer(self, i); j++) {
        PyObject *v = self->b[j].value;
        if (j == i || v == NULL || !nt_is_derived(v) || followed(self, j) != i)
            continue;
        nt_DerivedObject *d = (nt_DerivedObject *)v;
        if (newkey == 0) {
            char what[256];
            nt_param_label(sig, j, what, sizeof(what));
            PyErr_Format(PyExc_TypeError,
                         "rebind: %s holds %s() of the array parameter %d held, and a "
                         "%.100s has no shape to follow; rebind that parameter too, "
                         "or bind a buffer",
                         what,
                         d->kind == NT_DERIVED_SIZE        ? "size"
                             : d->kind == NT_DERIVED_SHAPE ? "shape"
                                                           : "stride",
                         i + 1, Py_TYPE(value)->tp_name);
            return -1;
        }
        follower *f = &p->f[p->n];
        f->marker = nt_derived_new(d->kind, source, d->axis, d->elements);
        if (f->marker == NULL)
            return -1;
        p->n++;
        f->param = j;
        if (nt_convert_derived_from(sig, j, (nt_DerivedObject *)f->marker, source, &f->cell,
                                    &f->key)
            < 0)
            return -1;
    }
    /* Room for what commit() retires, so that it cannot fail. */
    extra *x = nt_thunk_extra(self);
    if (x == NULL)
        return -1;
    Py_ssize_t need = x->nretired + 2 + p->n; /* + a dependency it replaces */
    if (need > x->capretired) {
        Py_ssize_t cap = need * 2;
        PyObject **r = PyMem_Realloc(x->retired, (size_t)cap * sizeof(PyObject *));
        if (r == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        x->retired = r;
        x->capretired = cap;
    }
    return 0;
}

static void retire(ThunkObject *self, int j, PyObject *value, uint64_t key)
{
    binding *b = &self->b[j];
    extra *x = self->x;
    x->retired[x->nretired++] = b->value; /* the reference moves */
    nt_held *h = b->held;
    while (h != NULL) {
        nt_held *next = h->next;
        h->next = x->retired_held;
        x->retired_held = h;
        h = next;
    }
    b->value = value; /* the reference moves in */
    b->held = NULL;
    b->key = key;
}

/* Publishes: the current context with the new cells, one release-store.
   No Python code runs here. */
static void commit(ThunkObject *self, int i, PyObject *value, const void *cell, nt_held *held,
                   uint64_t key, rebind_prep *p)
{
    const nt_plan *plan = self->plan;
    nt_ctx *fresh = p->fresh;
    p->fresh = NULL;
    memcpy(fresh->values, self->ctx->values, plan->values_size);
    memcpy(fresh->values + plan->slots[i].offset, cell, nt_cell_size(&self->sig->sig->args[i]));
    for (int k = 0; k < p->n; k++)
        memcpy(fresh->values + plan->slots[p->f[k].param].offset, &p->f[k].cell, 8);
    fresh->older = self->ctx;
    nt_entry_swap(&self->entry, fresh);
    /* Release: compiled code that reads the thunk's own cell (Numba's
       inlined calls, thunk_inline_layout) sees the filled context. */
    nt_atomic_store_ptr(&self->ctx, fresh, NT_RELEASE);
    self->gen++;
    retire(self, i, Py_NewRef(value), key);
    self->b[i].held = held;
    for (int k = 0; k < p->n; k++) {
        retire(self, p->f[k].param, p->f[k].marker, p->f[k].key);
        p->f[k].marker = NULL;
    }
    p->n = 0;
}

/* A function-pointer parameter rebound: the thunk the new value is, if
   any, checked as bind() checks it (live, not this thunk nor one that uses
   it), the chain depth with it in place, and room for the change, so that
   commit_dep cannot fail. Runs no Python code. */
static int prepare_dep(ThunkObject *self, int i, PyObject *value, const void *cell,
                       ThunkObject **out)
{
    void *p;
    memcpy(&p, cell, sizeof(p));
    char what[300];
    nt_param_label(self->sig->sig, i, what, sizeof(what));
    ThunkObject *d = NULL;
    if (nt_thunk_identify(p, nt_address_owner(value), self->sig->sig, i, &d) < 0
        || check_dep(self, p, d, what, "rebind to") < 0)
        return -1;
    int chain = 0, limit = self->entry.engine->chain_limit;
    for (int k = 0; self->x != NULL && k < self->x->ndeps; k++) {
        ThunkObject *o = self->x->deps[k].thunk;
        if (self->x->deps[k].param == i)
            continue;
        chain = Py_MAX(chain, o->chain + 1);
        limit = Py_MIN(limit, (int)o->chain_limit);
    }
    if (d != NULL) {
        chain = Py_MAX(chain, d->chain + 1);
        limit = Py_MIN(limit, (int)d->chain_limit);
        if (within_limit(self, chain, limit) < 0 || reserve_deps(self, 1) < 0
            || reserve_user(d) < 0)
            return -1;
    }
    *out = d;
    return 0;
}

/* After commit(): parameter i's dependency is d now. The one it replaces
   stays held with the retired values (an old context may still call it)
   until reclaim(). */
static void commit_dep(ThunkObject *self, int i, ThunkObject *d)
{
    extra *x = self->x;
    int at = -1;
    for (int k = 0; k < x->ndeps; k++)
        if (x->deps[k].param == i)
            at = k;
    if (at >= 0) {
        unlink_user(self, at);
        x->retired[x->nretired++] = (PyObject *)x->deps[at].thunk; /* the reference moves */
        if (d != NULL) {
            x->deps[at].thunk = (ThunkObject *)Py_NewRef(d);
        } else {
            /* the last edge moves into the hole: its user entry follows */
            x->deps[at] = x->deps[--x->ndeps];
            dep *moved = &x->deps[at];
            if (at != x->ndeps && moved->at >= 0)
                moved->thunk->x->users[moved->at].dep = at;
        }
    } else if (d != NULL) {
        push_dep(self, d, i);
        at = x->ndeps - 1;
    }
    if (d != NULL)
        link_user(self, at);
    self->gil_values = gil_of_values(self);
    refresh(self);
}

#define REBIND_RETRIES 100

/* The followers prepared against the current bindings; a rebind that
   completes in the meantime (from a finalizer, or another thread) means
   again. */
static int prepare_current(ThunkObject *self, int i, PyObject *value, uint64_t newkey,
                           rebind_prep *p)
{
    for (int attempt = 0;; attempt++) {
        NT_TSAN_SYNC();
        if (self->released) {
            PyErr_SetString(
                PyExc_ValueError,
                "the thunk was released while rebind() converted the new value" SEE_LIFETIME);
            return -1;
        }
        uint32_t gen = self->gen;
        if (prepare_followers(self, i, value, newkey, p) < 0)
            return -1;
        if (self->gen == gen && !self->released)
            return 0;
        prep_discard(p);
        if (attempt == REBIND_RETRIES) {
            PyErr_Format(PyExc_RuntimeError,
                         "rebind() was overtaken by other rebinds of this thunk %d times "
                         "in a row (it prepares again at most %d times)",
                         REBIND_RETRIES + 1, REBIND_RETRIES);
            return -1;
        }
    }
}

/* rebind() of bound parameter i (checked: 0 <= i < nargs) to value, a
   value the converter knows (resolved already): resolve (convert it, which
   may run Python code), then commit (runs none). 0, or -1 with an
   exception set. */
int nt_thunk_rebind(ThunkObject *self, int i, PyObject *value)
{
    const nt_sig *sig = self->sig->sig;
    if (self->plan->slots[i].src != NT_SRC_BOUND) {
        PyErr_Format(PyExc_ValueError,
                     "parameter %d is forwarded (numthunk.ARG), not bound; it cannot be rebound",
                     i);
        return -1;
    }
    if (value == NT_ARG) {
        PyErr_SetString(PyExc_ValueError,
                        "rebind cannot turn a bound parameter into a forwarded one");
        return -1;
    }
    /* Resolve: the new value into a cell of its own (Python code may run). */
    nt_memviewslice cell;
    nt_held *held = NULL;
    uint64_t newkey = 0;
    if (nt_convert(sig, i, value, &cell, &held, nt_thunk_mvspec(self, i), &newkey) < 0)
        return -1;
    rebind_prep p = { 0, NULL, NULL };
    p.f = PyMem_Calloc((size_t)(sig->nargs > 0 ? sig->nargs : 1), sizeof(follower));
    if (p.f == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    nt_error err;
    nt_error_init(&err);
    p.fresh = nt_ctx_new(self->plan, nt_thunk_target(self), &err);
    if (p.fresh == NULL) {
        nt_raise(&err);
        goto error;
    }
    if (prepare_current(self, i, value, newkey, &p) < 0)
        goto error;
    /* From here no Python code runs until the change is published. */
    NT_TSAN_SYNC();
    int function = sig->args[i].kind == NT_FNPTR;
    ThunkObject *d = NULL;
    if (function && prepare_dep(self, i, value, &cell, &d) < 0)
        goto error;
    commit(self, i, value, &cell, held, newkey, &p);
    if (function)
        commit_dep(self, i, d);
    prep_free(&p);
    return 0;
error:
    prep_free(&p);
    nt_held_release(held);
    return -1;
}
