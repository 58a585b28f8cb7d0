/*
 * numthunk backend choice: the one place that looks at the architecture
 * and the OS.
 *
 * It names the native backend for this platform (or none: every plan then
 * goes to libffi), the executable-memory policies to try, in order, and the
 * released-thunk trap. The files it names (backend_x86_64.c, mem_*.c) are
 * built only where their branch is taken; nothing else in the tree tests
 * the platform.
 */
#include <stdlib.h>
#include <string.h>

#include "numthunk.h"
#include "execmem.h"

#if defined(__x86_64__) && defined(__linux__)

#include <pthread.h>
#include <unistd.h>

extern const nt_backend nt_backend_x86_64_sysv;
const nt_backend *const nt_backend_native = &nt_backend_x86_64_sysv;

/* memfd first: it also works under SELinux deny_execmem, which refuses the
   RW->RX mprotect of anonymous memory. */
static const nt_execmem *const policies[] = {
    &nt_execmem_memfd,
    &nt_execmem_mprotect,
};
#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

static const nt_execmem *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void
choose_policy(void)
{
    /* NUMTHUNK_EXECMEM=memfd|mprotect: only the named policy (tests). */
    const char *want = getenv("NUMTHUNK_EXECMEM");
    for (size_t i = 0; i < NPOLICIES; i++) {
        const char *name = policies[i]->name;
        if (want != NULL && *want != '\0'
            && strncmp(name, want, strlen(want)) != 0)
            continue;
        if (policies[i]->init() == 0) {
            chosen = policies[i];
            return;
        }
    }
}

const nt_execmem *
nt_execmem_get(void)
{
    pthread_once(&chosen_once, choose_policy);
    return chosen;
}

void
nt_trap_released(void)
{
    static const char msg[] = "numthunk: called a released thunk\n";
    ssize_t rc = write(2, msg, sizeof(msg) - 1);
    (void)rc;
    abort();
}

/* The platform's files are part of this branch: nothing else builds them. */
#include "backend_x86_64.c"
#include "mem_memfd.c"
#include "mem_mprotect.c"

#else /* no native backend on this platform */

#include <stdio.h>

const nt_backend *const nt_backend_native = NULL;

const nt_execmem *
nt_execmem_get(void)
{
    return NULL;
}

void
nt_trap_released(void)
{
    fputs("numthunk: called a released thunk\n", stderr);
    fflush(stderr);
    abort();
}

#endif
