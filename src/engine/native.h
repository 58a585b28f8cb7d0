/*
 * numthunk native engine, the architecture-neutral half (engine/native.c).
 *
 * A native thunk is an entry stub, a slot holding its context pointer, and
 * a handler shared by every plan of the same shape (docs/architecture.md,
 * "The pipeline"). Everything here belongs to no architecture: stub blocks and
 * their slot pages, the handler cache keyed by shape, the choice of and
 * fallback between executable-memory policies, the released trap context.
 * The handler planner (engine/route.h) decides from an architecture's ABI
 * description which plans run natively, their shapes and each handler's
 * steps; an architecture file (engine/arch/x86_64.c, ...) supplies an nt_arch:
 * that description, its stub, and an emitter for each step. engine/choose.c
 * names the arch for the platform in its one #if chain.
 *
 * The quarantine and the fork hooks are shared with the libffi engine
 * (life/quarantine.h): both hand released entries to nt_quarantine_push, under
 * one policy.
 *
 * Place in the pipeline: engine: between the neutral half (engine/native.c)
 * and the arch files (engine/arch/).
 */
#ifndef NUMTHUNK_NATIVE_H
#define NUMTHUNK_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "numthunk.h"
#include "engine/memory/execmem.h"
#include "engine/route.h"

/* ------------------------------------------------------------------------ */
/* Configuration: read once from the environment (engine/choose.c)                */

typedef struct nt_config {
    /* NUMTHUNK_ENGINE: "auto", "native" or "ffi" (the engine for plans
       that do not ask for one); forced is NULL for auto. engine_from is
       the variable it came from: "NUMTHUNK_ENGINE", "NUMTHUNK_BACKEND"
       (its old name) or "default". */
    const char *engine;
    const char *engine_from;
    const nt_engine *forced;
    /* NUMTHUNK_EXECMEM: "auto" (every policy in order), "memfd",
       "mprotect" (that one only) or "none" (no executable memory: new
       thunks go to libffi). */
    const char *execmem;
    int no_reuse;        /* NUMTHUNK_NO_REUSE: never reuse an address */
    unsigned quarantine; /* releases an entry waits before reuse */
    char error[192];     /* non-empty: a variable holds a refused value */
} nt_config;

const nt_config *nt_config_get(void);

/* What NEW thunks get now, for plans the native engine can run: the engine,
   its memory policy, and the executable-memory fallbacks taken so far. */
#define NT_FALLBACK_MAX 4
#define NT_REASON_MAX   200
typedef struct nt_engine_status {
    const char *engine;
    const char *memory_policy;
    int nfallbacks;
    char fallbacks[NT_FALLBACK_MAX][NT_REASON_MAX]; /* "policy: why" */
} nt_engine_status;

void nt_engine_status_get(nt_engine_status *out);

/* ------------------------------------------------------------------------ */
/* What an architecture provides                                             */

#define NT_SHAPE_KEY_MAX 1024 /* bytes of a shape key */
#define NT_HANDLER_MAX   8192 /* bytes of code one handler may take */

/*
 * An architecture file (engine/arch/<arch>.c) describes its calling convention
 * and encodes; everything else is common. The planner (engine/route.c)
 * decides which plans run natively, their shape keys and each handler's
 * steps from abi; the arch turns them into code, all of it through
 * nt_code_put: enter, then step for each step in order, then leave.
 */
typedef struct nt_arch {
    nt_abi abi;
    /* Bytes per entry stub; a power of two dividing NT_PAGE_SIZE. */
    size_t stub_size;
    /* Writes one stub into out (stub_size bytes): load the pointer stored
       slot_disp bytes after the stub's first byte (its slot: the context)
       into abi.ctx_reg and jump through word 0 of that context. */
    void (*build_stub)(uint8_t *out, int32_t slot_disp);
    /* The handler's entry (a landing pad for indirect branches), and in
       the frame form the frame record and hp->frame bytes more of stack. */
    void (*enter)(nt_code *b, const nt_route *hp);
    /* One step: one move, which may extend a narrow int or load a bound
       value; any registers besides its destination that it writes are the
       ABI's copy registers. */
    void (*step)(nt_code *b, const nt_step *s);
    /* To the target (its address is word NT_CTX_TARGET_OFFSET of the
       context): a tail jump, or a call, the frame undone, and a return. */
    void (*leave)(nt_code *b, const nt_route *hp);
} nt_arch;

/* The handler's code for a plan the arch supports (nt_handler_supports on
   its abi), into code (cap bytes); returns its length, 0 if it did not fit
   (engine/route.c). */
size_t nt_handler_gen(const nt_arch *arch, const nt_plan *plan, uint8_t *code, size_t cap);

/* The arch of this platform's native engine (engine/choose.c), NULL if none. */
extern const nt_arch *const nt_arch_native;

/* Tests only: starts the native engine on arch a instead of nt_arch_native
   (tests/c/test_native.c runs Apple's arm64 description under qemu on
   Linux, against Apple-compiled code). Must come before anything else asks
   the engine. 0 if the engine now runs on a, else -1 (it had started, or
   does not start on a). */
int nt_native_test_arch(const nt_arch *a);
/* Executable-memory policies in the order to try them, NULL-terminated
   (engine/choose.c). */
extern const nt_execmem *const nt_execmem_policies[];

/* ------------------------------------------------------------------------ */
/* The native engine's nt_engine functions (engine/native.c)                       */

nt_status nt_native_supports(const nt_plan *plan);
nt_status nt_native_prepare(nt_plan *plan, nt_error *err);
void nt_native_plan_release(nt_plan *plan);
nt_status nt_native_entry_new(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                              nt_error *err);
void nt_native_entry_swap(nt_entry *entry, nt_ctx *ctx);
void nt_native_entry_free(nt_entry *entry, nt_what *what);
const char *nt_native_memory_policy(void);

/* A native thunk's handler jumps to its target (no frame) or builds one
   frame the size of the target's stack arguments: a chain of them is
   cheap on the C stack. */
#define NT_NATIVE_CHAIN_LIMIT 1024

/* The vtable of the native engine named name (engine/choose.c's #if chain). */
#define NT_NATIVE_ENGINE(engine_name)                                                              \
    {                                                                                              \
        .name = engine_name, .chain_limit = NT_NATIVE_CHAIN_LIMIT, .supports = nt_native_supports, \
        .prepare = nt_native_prepare, .plan_release = nt_native_plan_release,                      \
        .entry_new = nt_native_entry_new, .entry_swap = nt_native_entry_swap,                      \
        .entry_free = nt_native_entry_free, .memory_policy = nt_native_memory_policy               \
    }

/* The executable-memory fallbacks taken so far, oldest first, each
   "policy: why" (all NT_FALLBACK_MAX rows copied under the engine lock).
   Returns their number. */
int nt_native_fallbacks(char (*out)[NT_REASON_MAX]);

#endif /* NUMTHUNK_NATIVE_H */
