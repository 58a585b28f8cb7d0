/*
 * What a released thunk says when it is called anyway (numthunk.h,
 * nt_what): the description each plan keeps of its thunks ("double (void)
 * over double (const double *, int)" and the target), which an entry's
 * trap reads, and the trap itself, which writes it and aborts.
 *
 * Place in the pipeline: life, after release. Both engines
 * point a released entry here (engine/native.c through its trap code,
 * engine/ffi.c from its closure handler).
 */
#include "numthunk.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

nt_what *nt_what_ref(nt_what *what)
{
    if (what != NULL)
        nt_atomic_add_size(&what->refs, 1, NT_RELAXED);
    return what;
}

void nt_what_unref(nt_what *what)
{
    if (what != NULL && nt_atomic_sub_size(&what->refs, 1, NT_ACQ_REL) == 0)
        free(what);
}

_Static_assert(offsetof(nt_what, handler) == NT_CTX_HANDLER_OFFSET
                   && offsetof(nt_what, text) == NT_CTX_VALUES_OFFSET
                   && offsetof(nt_what, target) == NT_CTX_VALUES_OFFSET + sizeof(void *),
               "nt_what is laid out as a context with two values");

/* "double (void) over double (const double *, int)", once per plan */
static const char *plan_text(nt_plan *plan)
{
    if (plan->text != NULL)
        return plan->text;
    /* the thunk's own signature: the return type and the forwarded
       parameters (shallow copies: formatting only reads them) */
    nt_type none;
    nt_sig own = { plan->target->ret, plan->nfwd, &none, NULL };
    if (plan->nfwd > 0 && (own.args = malloc((size_t)plan->nfwd * sizeof(nt_type))) == NULL)
        return NULL;
    for (int k = 0; k < plan->nfwd; k++)
        own.args[k] = plan->target->args[plan->fwd_index[k]];
    char text[NT_WHAT_MAX];
    size_t n = nt_sig_format(&own, text, sizeof(text));
    if (own.args != &none)
        free(own.args);
    if (n + 6 < sizeof(text)) {
        memcpy(text + n, " over ", 7);
        n += 6 + nt_sig_format(plan->target, text + n + 6, sizeof(text) - n - 6);
    } else if (n + 3 < sizeof(text)) {
        memcpy(text + n, "...", 4); /* " over " and the target left out */
    } else {
        n = sizeof(text); /* and the end of the thunk's own */
    }
    /* a long signature is cut where the trap's text ends, and says so */
    nt_mark_cut(text, sizeof(text), n);
    plan->text = nt_strdup(text);
    return plan->text;
}

nt_what *nt_plan_what(nt_plan *plan, const void *target)
{
    if (plan->what != NULL && plan->what->target == target)
        return plan->what;
    const char *text = plan_text(plan);
    if (text == NULL)
        return NULL;
    size_t len = strlen(text);
    nt_what *what = malloc(sizeof(nt_what) + len + 1);
    if (what == NULL)
        return NULL;
    memcpy(what->chars, text, len + 1);
    what->handler = NULL;
    what->trap = (void *)nt_trap_released_at;
    what->unused_ = NULL;
    what->refs = 1; /* the plan's */
    what->text = what->chars;
    what->target = target;
    nt_what_unref(plan->what);
    plan->what = what;
    return what;
}

static void say(const char *text, size_t n)
{
    nt_write_stderr(text, n);
}

void nt_trap_released_at(const char *what, const void *target)
{
    /* write() and abort() only: this runs in any thread, without the GIL,
       possibly where nothing else is safe (a signal handler). */
    static const char head[] = "numthunk: called a released thunk";
    static const char advice[] =
        "numthunk: its address was called after release(), or after the last "
        "reference to the thunk went. Usually a temporary whose address was "
        "kept (solver(nt.bind(...).address, ...)), or a container that does "
        "not hold the thunk: keep the thunk itself for as long as C code may "
        "call its address (in a variable, or `with nt.bind(...) as t:`). "
        "See docs/lifetime.md.\n";
    say(head, sizeof(head) - 1);
    if (what != NULL && what[0] != '\0') {
        say(": ", 2);
        say(what, strnlen(what, NT_WHAT_MAX));
    }
    if (target != NULL) {
        char hex[2 + 2 * sizeof(uintptr_t)];
        uintptr_t v = (uintptr_t)target;
        size_t n = sizeof(hex);
        do {
            hex[--n] = "0123456789abcdef"[v & 15];
            v >>= 4;
        } while (v != 0); /* at most 2 * sizeof v digits: "0x" fits before */
        hex[--n] = 'x';
        hex[--n] = '0';
        say(", target at ", 12);
        say(hex + n, sizeof(hex) - n);
    }
    say("\n", 1);
    say(advice, sizeof(advice) - 1);
    abort();
}

void nt_trap_released(void)
{
    nt_trap_released_at(NULL, NULL);
}
