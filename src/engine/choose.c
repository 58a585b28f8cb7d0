/*
 * numthunk engine choice: the one place that looks at the architecture and
 * the OS, and the one place that reads the environment.
 *
 * "Engine" is the word users see (bind(engine=...), Thunk.engine,
 * engine_info(), NUMTHUNK_ENGINE); in C an engine is an nt_engine: the
 * native engine (engine/native.c over the arch file this chain names) or libffi
 * (engine/ffi.c).
 *
 * The #if chain names the native engine's arch for this platform (or none:
 * every plan then goes to libffi), the executable-memory policies to try,
 * in order, and the released-thunk trap. The files it names
 * (engine/arch/<arch>.c, engine/memory/) are built only where their branch is taken;
 * nothing else in the tree tests the platform. Adding an architecture on
 * Linux is one branch: its arch file, the two memory policies, and
 * LINUX_NATIVE(its nt_arch, its engine name).
 *
 * Place in the pipeline: engine, its entrance: the plan (plan/plan.c) asks
 * here which engine makes its entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numthunk.h"
#include "engine/memory/execmem.h"
#include "engine/native.h"

/* A native engine on Linux: its arch, its name, the memory policies in the
   order to try them. memfd first: it also works under SELinux
   deny_execmem, which refuses the RW->RX mprotect of anonymous memory. */
#define LINUX_NATIVE(arch, engine_name)                                                        \
    const nt_arch *const nt_arch_native = &arch;                                               \
    static const nt_engine native_engine = NT_NATIVE_ENGINE(engine_name);                      \
    const nt_engine *const nt_engine_native = &native_engine;                                  \
    const nt_execmem *const nt_execmem_policies[] = { &nt_execmem_memfd, &nt_execmem_mprotect, \
                                                      NULL };

/* A native engine on Windows: Microsoft x64, a pagefile-backed section
   seen through two views (RW to write, RX to run) first, then
   VirtualAlloc'd pages sealed with VirtualProtect. */
#define WINDOWS_NATIVE(arch, engine_name)                                  \
    const nt_arch *const nt_arch_native = &arch;                           \
    static const nt_engine native_engine = NT_NATIVE_ENGINE(engine_name);  \
    const nt_engine *const nt_engine_native = &native_engine;              \
    const nt_execmem *const nt_execmem_policies[] = { &nt_execmem_filemap, \
                                                      &nt_execmem_virtualprotect, NULL };

/* The platform's files are part of its branch: nothing else builds them. */
#if defined(__x86_64__) && defined(__linux__) && defined(NT_TEST_ABI_WIN64)
/* Tests only (tests/c/test_native.c built with -DNT_TEST_ABI_WIN64): the
   Microsoft x64 description on x86-64 Linux, called through
   __attribute__((ms_abi)) function pointers and calling ms_abi callees,
   on Linux's memory policies. */
#include "engine/arch/x86_64.c"
#include "engine/memory/memfd.c"
#include "engine/memory/mprotect.c"
LINUX_NATIVE(nt_arch_x86_64_win64, "native-x86_64-win64")

#elif defined(__x86_64__) && defined(__linux__)
#include "engine/arch/x86_64.c"
#include "engine/memory/memfd.c"
#include "engine/memory/mprotect.c"
LINUX_NATIVE(nt_arch_x86_64_sysv, "native-x86_64-sysv")

#elif defined(__aarch64__) && defined(__linux__) && !defined(__APPLE__)
/* AAPCS64 as Linux has it (8-byte stack slots, no MAP_JIT). */
#include "engine/arch/aarch64.c"
#include "engine/memory/memfd.c"
#include "engine/memory/mprotect.c"
LINUX_NATIVE(nt_arch_aarch64_linux, "native-aarch64-linux")

#elif defined(__aarch64__) && defined(__APPLE__)
/* Apple's arm64 ABI: the same arch file, its description with packed stack
   arguments (tested under qemu by tests/c/aarch64.sh). Executable memory:
   MAP_JIT with the per-thread write switch, then an executable alias of
   written pages, then sealed pages; compiled by tools/cross.sh, never run
   (docs/engines.md). Its pages are 16 KiB: engine/native.c makes its
   blocks of the system's pages. */
#include "engine/arch/aarch64.c"
#include "engine/memory/mapjit.c"
#include "engine/memory/mprotect.c"
#include "engine/memory/remap.c"
const nt_arch *const nt_arch_native = &nt_arch_aarch64_apple;
static const nt_engine native_engine = NT_NATIVE_ENGINE("native-aarch64-apple");
const nt_engine *const nt_engine_native = &native_engine;
const nt_execmem *const nt_execmem_policies[] = { &nt_execmem_mapjit, &nt_execmem_remap,
                                                  &nt_execmem_mprotect, NULL };

#elif defined(__APPLE__) && defined(__x86_64__)
/* System V x86-64, as on Linux. Pages sealed with mprotect first, then an
   executable alias of written pages (engine/memory/remap.c). MAP_JIT is
   not used: on x86-64 it gives pages writable and executable at once.
   Compiled by tools/cross.sh, never run (docs/engines.md). */
#include "engine/arch/x86_64.c"
#include "engine/memory/mprotect.c"
#include "engine/memory/remap.c"
const nt_arch *const nt_arch_native = &nt_arch_x86_64_sysv;
static const nt_engine native_engine = NT_NATIVE_ENGINE("native-x86_64-sysv");
const nt_engine *const nt_engine_native = &native_engine;
const nt_execmem *const nt_execmem_policies[] = { &nt_execmem_mprotect, &nt_execmem_remap, NULL };

#elif defined(_WIN64) && (defined(__x86_64__) || defined(_M_X64))
/* Microsoft x64 (LLP64: the kind table reads long as 32 bits from this
   compiler). */
#include "engine/arch/x86_64.c"
#include "engine/memory/filemap.c"
#include "engine/memory/virtualprotect.c"
WINDOWS_NATIVE(nt_arch_x86_64_win64, "native-x86_64-win64")

#else /* no native engine on this platform: every plan runs on libffi */
const nt_arch *const nt_arch_native = NULL;
const nt_engine *const nt_engine_native = NULL;
const nt_execmem *const nt_execmem_policies[] = { NULL };
#endif

/* ------------------------------------------------------------------------ */
/* Engine names                                                              */

nt_status nt_engine_parse(const char *name, const char *where, const nt_engine **out, nt_error *err)
{
    *out = NULL;
    if (name == NULL || strcmp(name, "auto") == 0)
        return NT_OK;
    if (strcmp(name, "ffi") == 0 || strcmp(name, nt_engine_ffi.name) == 0) {
        *out = &nt_engine_ffi;
        return NT_OK;
    }
    if (strcmp(name, "native") != 0)
        return nt_fail(err, NT_ERR_VALUE, -1, "%s'%.40s': expected %s", where, name,
                       NT_ENGINE_NAMES);
    if (nt_engine_native == NULL)
        return nt_fail(err, NT_ERR_VALUE, -1,
                       "%s'native': this platform has "
                       "no native engine (use 'ffi' or 'auto')",
                       where);
    *out = nt_engine_native;
    return NT_OK;
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

/* A released entry waits for this many later releases before its address
   may serve again: about 768 KiB of native stubs and slots, or a few MB of
   libffi closures. */
#define QUARANTINE 32768u

static nt_config config;
static nt_once config_once = NT_ONCE_INIT;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? v : dflt;
}

/* A boolean setting: 1, true, yes / 0, false, no (any case); -1 for
   anything else, which the import refuses rather than guess. */
static int yes_or_no(const char *v)
{
    static const char *const yes[] = { "1", "true", "yes" };
    static const char *const no[] = { "0", "false", "no" };
    for (size_t i = 0; i < 3; i++) {
        if (nt_strcasecmp(v, yes[i]) == 0)
            return 1;
        if (nt_strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* 1 if name is a memory policy of this platform: its full name
   ("memfd-pwrite") or the part before the dash ("memfd"), as
   engine/native.c's choose_policy matches it. */
static int policy_named(const char *name)
{
    for (size_t i = 0; nt_execmem_policies[i] != NULL; i++) {
        const char *full = nt_execmem_policies[i]->name;
        size_t n = strlen(name);
        if (strcmp(full, name) == 0 || (strncmp(full, name, n) == 0 && full[n] == '-'))
            return 1;
    }
    return 0;
}

/* "NUMTHUNK_EXECMEM=<value>: expected 'memfd', 'mprotect', 'none' or 'auto'",
   with this platform's policies. */
static void policy_names(const char *value, char *out, size_t cap)
{
    int n = snprintf(out, cap, "NUMTHUNK_EXECMEM=%.40s: expected ", value);
    for (size_t i = 0; nt_execmem_policies[i] != NULL && n > 0 && (size_t)n < cap; i++) {
        const char *full = nt_execmem_policies[i]->name;
        n += snprintf(out + n, cap - (size_t)n, "'%.*s', ", (int)strcspn(full, "-"), full);
    }
    if (n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, "'none' or 'auto'");
}

static void read_config(void)
{
    nt_config *c = &config;
    /* NUMTHUNK_ENGINE; NUMTHUNK_BACKEND is its old name, read for one
       release when the new one is unset (the package warns at import). */
    const char *engine = env_or("NUMTHUNK_ENGINE", "");
    const char *old = env_or("NUMTHUNK_BACKEND", "");
    c->engine_from = "default";
    c->engine = "auto";
    if (engine[0] != '\0') {
        c->engine_from = "NUMTHUNK_ENGINE";
        c->engine = engine;
    } else if (old[0] != '\0') {
        c->engine_from = "NUMTHUNK_BACKEND";
        c->engine = old;
    }
    c->execmem = env_or("NUMTHUNK_EXECMEM", "auto");
    const char *nr = env_or("NUMTHUNK_NO_REUSE", "0");
    c->no_reuse = yes_or_no(nr);
    if (c->no_reuse < 0) {
        c->no_reuse = 1; /* the import fails; never reuse meanwhile */
        snprintf(c->error, sizeof(c->error),
                 "NUMTHUNK_NO_REUSE=%.40s: expected 1, true, yes (never reuse an "
                 "address) or 0, false, no, empty (the default)",
                 nr);
    }
    const char *q = env_or("NUMTHUNK_QUARANTINE", "");
    c->quarantine = QUARANTINE;
    if (q[0] != '\0') {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(q, &end, 10);
        if (q[0] < '1' || q[0] > '9' || *end != '\0' || errno != 0 || n > (1ull << 30))
            snprintf(c->error, sizeof(c->error),
                     "NUMTHUNK_QUARANTINE=%.40s: expected a count of releases from 1 to "
                     "1073741824 (empty: the default, %u)",
                     q, QUARANTINE);
        else
            c->quarantine = (unsigned)n;
    }
    nt_error err = { NT_OK, -1, "" };
    char where[32];
    snprintf(where, sizeof(where), "%s=", c->engine_from);
    if (engine[0] != '\0' && old[0] != '\0' && strcmp(engine, old) != 0)
        snprintf(c->error, sizeof(c->error),
                 "NUMTHUNK_ENGINE=%.40s and NUMTHUNK_BACKEND=%.40s differ: set "
                 "NUMTHUNK_ENGINE only (NUMTHUNK_BACKEND is its old name)",
                 engine, old);
    else if (nt_engine_parse(c->engine, where, &c->forced, &err) != NT_OK)
        snprintf(c->error, sizeof(c->error), "%.*s", (int)sizeof(c->error) - 1, err.msg);
    const char *m = c->execmem;
    if (strcmp(m, "auto") != 0 && strcmp(m, "none") != 0 && !policy_named(m) && c->error[0] == '\0')
        policy_names(m, c->error, sizeof(c->error));
}

const nt_config *nt_config_get(void)
{
    nt_call_once(&config_once, read_config);
    return &config;
}

/* ------------------------------------------------------------------------ */
/* Which engine runs a plan, and what new thunks get                         */

const nt_engine *nt_choose_engine(const nt_plan *plan, const nt_engine *wanted, nt_error *err)
{
    if (wanted == NULL)
        wanted = nt_config_get()->forced;
    /* Plans the native engine cannot run (struct or complex values, or no
       executable memory left) go to libffi even when native is asked for. */
    if (wanted != &nt_engine_ffi && nt_engine_native != NULL
        && nt_engine_native->supports(plan) == NT_OK)
        return nt_engine_native;
    if (nt_engine_ffi.supports(plan) == NT_OK)
        return &nt_engine_ffi;
    nt_fail(err, NT_ERR_UNSUPPORTED, -1, "no engine supports this signature");
    return NULL;
}

void nt_engine_status_get(nt_engine_status *out)
{
    const nt_config *c = nt_config_get();
    const char *native_policy =
        nt_engine_native != NULL ? nt_engine_native->memory_policy() : "none";
    int native = c->forced != &nt_engine_ffi && nt_engine_native != NULL
        && strcmp(native_policy, "none") != 0;
    out->engine = native ? nt_engine_native->name : nt_engine_ffi.name;
    out->memory_policy = native ? native_policy : nt_engine_ffi.memory_policy();
    out->nfallbacks = nt_engine_native != NULL ? nt_native_fallbacks(out->fallbacks) : 0;
}
