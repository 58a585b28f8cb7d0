/*
 * numthunk native engine, architecture-neutral half: plan -> stub + slot +
 * shared handler, on executable memory that is never writable.
 *
 * Place in the pipeline: engine, between the plan (plan/plan.c) and executable memory
 * (engine/memory/). The handler planner (engine/route.c) decides which plans run
 * here, their shape keys and their handlers' code, over the architecture
 * file named by engine/choose.c (nt_arch_native: its ABI description, stub and
 * emitters); this file owns what every architecture shares
 * (docs/architecture.md, "The engine contract"):
 *
 *   - stub blocks: BLOCK_STUBS identical stubs, sealed read+execute, then
 *     one page of slots (private read+write) at a fixed distance, so stub i
 *     reaches slot i pc-relative; a slot holds its thunk's context pointer;
 *   - the handler cache: shape key -> handler code, counted by the plans
 *     that use it; unused, a handler waits in the quarantine's code ring,
 *     then its code goes back to its memory policy;
 *   - the executable-memory policies, tried in engine/choose.c's order; when one
 *     fails while placing code (memfd pwrite/ftruncate refused with EFBIG
 *     under RLIMIT_FSIZE, EPERM, ENOSPC, ...), the next takes over, and
 *     when none is left new thunks run on libffi (nt_engine_ffi), still
 *     made through this engine's vtable, their entries libffi's (below);
 *   - the released trap context; released slots go to the quarantine
 *     (life/quarantine.c, shared with libffi), whose fork hooks also hold this
 *     engine's lock.
 *
 * Code is written only through place_code(), which flushes the instruction
 * cache once after the policy wrote it (NT_ICACHE_FLUSH: nothing on x86).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/native.h"
#include "portable.h"
#include "life/quarantine.h"
#include "life/fork.h"

/* One page of 8-byte slots per block, one stub per slot: the page is the
   system's (NT_PAGE_SIZE, engine/memory/execmem.h), so a block holds 512
   stubs with 4 KiB pages, 2048 with 16 KiB and 8192 with 64 KiB. The
   stubs reach their slots pc-relative: a block's code is at most 64 KiB /
   8 x the arch's stub size (128 KiB for AArch64's 16-byte stubs), within
   the reach of every arch's load (AArch64's ldr literal: 1 MiB). */
#define BLOCK_STUBS (NT_PAGE_SIZE / sizeof(xslot))
#define BLOCK_DATA  NT_PAGE_SIZE

typedef struct {
    nt_ctx *ctx; /* read by the stub; written with release */
} xslot;

/* The engine lock guards everything below. The quarantine (life/quarantine.c)
   has its own; lock order: quarantine, then engine. */
static nt_spin lock;
static nt_once init_once = NT_ONCE_INIT;

size_t nt_exec_page; /* NT_PAGE_SIZE: set once by init(), before any policy */

static const nt_arch *arch;
static uint8_t *stub_image; /* one block of stubs, built once */
static size_t block_code;   /* bytes of stubs per block, page multiple */

static xslot *cur_slots; /* slot page of the block being handed out */
static size_t cur_used;
static xslot **free_slots; /* slots back from quarantine, reusable */
static size_t nfree, free_cap;

/* Executable memory: policy is nt_execmem_policies[policy_at], or NULL
   once none is left (or NUMTHUNK_EXECMEM=none). */
static const nt_execmem *policy;
static size_t policy_at;
static char fallbacks[NT_FALLBACK_MAX][NT_REASON_MAX];
static int nfallbacks;

/* A released slot points at its thunk's description (nt_what), laid out
   as a context whose handler, trap_code, calls nt_trap_released_at with its
   text and target. Where there is none, the slot points here; word 0 is the
   trap, which then names nothing. */
static nt_ctx released_ctx = { (void *)nt_trap_released, NULL, NULL, 0 };
static void *trap_code;

/* ------------------------------------------------------------------------ */
/* Executable memory with fallback                                           */

/* Records "what: why" (engine lock held, or init). */
static void note_fallback(const char *what, const char *why)
{
    if (nfallbacks < NT_FALLBACK_MAX)
        snprintf(fallbacks[nfallbacks++], NT_REASON_MAX, "%.40s: %.150s", what, why);
}

/* Makes the first working policy from nt_execmem_policies[from] on the
   current one, or none. Engine lock held (or init). */
static void choose_policy(size_t from)
{
    const char *want = nt_config_get()->execmem;
    nt_atomic_store_ptr(&policy, NULL, NT_RELEASE);
    if (strcmp(want, "none") == 0) {
        note_fallback("NUMTHUNK_EXECMEM=none", "no executable memory: new thunks use libffi");
        return;
    }
    for (size_t i = from; nt_execmem_policies[i] != NULL; i++) {
        const nt_execmem *p = nt_execmem_policies[i];
        if (strcmp(want, "auto") != 0 && strncmp(p->name, want, strlen(want)) != 0)
            continue;
        if (p->init() == 0) {
            policy_at = i;
            nt_atomic_store_ptr(&policy, p, NT_RELEASE);
            return;
        }
        note_fallback(p->name, "refused by the system at start");
    }
    note_fallback("no executable-memory policy left", "new thunks use libffi");
}

/*
 * Places code through the current policy; when it fails, records why and
 * moves on to the next policy, until one works or none is left (NULL, err
 * filled). Engine lock held.
 */
static void *place_code(const void *code, size_t n, size_t data_after, nt_error *err)
{
    while (policy != NULL) {
        nt_error perr;
        nt_error_init(&perr);
        void *at = policy->place(code, n, data_after, &perr);
        if (at != NULL) {
            NT_ICACHE_FLUSH(at, n);
            return at;
        }
        note_fallback(policy->name, perr.msg);
        choose_policy(policy_at + 1);
    }
    nt_fail(err, NT_ERR_MEMORY, -1, "numthunk: no executable memory for native thunks");
    return NULL;
}

int nt_native_fallbacks(char (*out)[NT_REASON_MAX])
{
    nt_spin_lock(&lock);
    memcpy(out, fallbacks, sizeof(fallbacks));
    int n = nfallbacks;
    nt_spin_unlock(&lock);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Initialisation                                                            */

/* In a fork child, with the engine lock held (life/quarantine.c's fork hooks):
   every policy that may have been used stops writing shared memory. */
static void after_fork_child(void)
{
    for (size_t i = 0; nt_execmem_policies[i] != NULL; i++)
        nt_execmem_policies[i]->after_fork_child();
}

static void make_trap_handler(void);
static void init(void);

/* The arch the engine starts with: this platform's, or the one a test
   named before the engine started (nt_native_test_arch). */
static const nt_arch *arch_chosen;

int nt_native_test_arch(const nt_arch *a)
{
    /* Tests call it first, from one thread, before anything else asks the
       engine: afterwards the engine has started and keeps its arch. */
    if (arch_chosen == NULL)
        arch_chosen = a;
    nt_call_once(&init_once, init);
    return arch == a && a != NULL ? 0 : -1;
}

static void init(void)
{
    const nt_arch *native = arch_chosen != NULL ? arch_chosen : nt_arch_native;
    if (native == NULL)
        return;
    /* Otherwise arch stays NULL: this engine takes no plan. A block is
       stubs then a slot page, in pages of the system's size: a page of
       another size than a power of two from 4 to 64 KiB is not planned. */
    long page = nt_page_size();
    if (page < (long)NT_PAGE_SIZE_MIN || page > (long)NT_PAGE_SIZE_MAX
        || (page & (page - 1)) != 0) {
        char why[NT_REASON_MAX];
        snprintf(why, sizeof why,
                 "%ld bytes, not a power of two from 4 to 64 KiB: new thunks use libffi", page);
        note_fallback("page size", why);
        return;
    }
    nt_exec_page = (size_t)page;
    if (nt_abi_check(&native->abi) != 0) {
        note_fallback("architecture",
                      "inconsistent ABI description: new "
                      "thunks use libffi");
        return;
    }
    arch = native;
    block_code = nt_round_up(BLOCK_STUBS * arch->stub_size, NT_PAGE_SIZE);
    stub_image = malloc(block_code);
    if (stub_image == NULL) {
        note_fallback("stub image", "out of memory: new thunks use libffi");
        return;
    }
    memset(stub_image, 0, block_code);
    for (size_t i = 0; i < BLOCK_STUBS; i++)
        arch->build_stub(stub_image + i * arch->stub_size,
                         (int32_t)(block_code + sizeof(xslot) * i - arch->stub_size * i));
    choose_policy(0);
    nt_fork_hooks(&lock, after_fork_child);
    make_trap_handler();
}

/* 1 if native code can still be placed (engine lock not needed: policy
   only ever goes from a policy to a later one or NULL). */
static int ready(void)
{
    nt_call_once(&init_once, init);
    return nt_atomic_load_ptr(&policy, NT_ACQUIRE) != NULL;
}

const char *nt_native_memory_policy(void)
{
    if (!ready())
        return "none";
    nt_spin_lock(&lock);
    const char *name = policy != NULL ? policy->name : "none";
    nt_spin_unlock(&lock);
    return name;
}

/* ------------------------------------------------------------------------ */
/* Handler cache: shape key -> code                                          */

/*
 * One handler per distinct plan shape, shared by the plans of that shape and
 * counted by them. When the last plan goes, the handler waits in the
 * quarantine's code ring (a plan of its shape made meanwhile takes it
 * back); when it leaves, its code goes back to the memory policy that
 * placed it and its entry leaves the table. A program that makes thunks of
 * ever new shapes therefore keeps about one quarantine's worth of handlers,
 * not all of them.
 */
typedef struct handler {
    uint64_t hash;
    size_t keylen;
    uint8_t *key;
    void *code;
    size_t len;               /* bytes of code placed */
    const nt_execmem *policy; /* placed it; takes it back */
    unsigned refs;            /* plans using it */
    uint8_t queued;           /* in the quarantine */
    uint8_t requeue;          /* unused again while queued: wait once more */
} handler;

static handler **htab; /* open addressing, linear probing */
static size_t hcap, hcount;

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The table cell holding key, or the empty cell where it would go. */
static handler **hfind(const uint8_t *key, size_t keylen, uint64_t h)
{
    if (hcap == 0)
        return NULL;
    for (size_t i = h & (hcap - 1);; i = (i + 1) & (hcap - 1)) {
        handler *s = htab[i];
        if (s == NULL)
            return &htab[i];
        if (s->hash == h && s->keylen == keylen && memcmp(s->key, key, keylen) == 0)
            return &htab[i];
    }
}

static int hgrow(void)
{
    size_t ncap = hcap ? hcap * 2 : 64;
    handler **nt = calloc(ncap, sizeof(*nt));
    if (nt == NULL)
        return -1;
    for (size_t i = 0; i < hcap; i++) {
        if (htab[i] == NULL)
            continue;
        size_t j = htab[i]->hash & (ncap - 1);
        while (nt[j] != NULL)
            j = (j + 1) & (ncap - 1);
        nt[j] = htab[i];
    }
    free(htab);
    htab = nt;
    hcap = ncap;
    return 0;
}

/* Empties a cell; entries after it in its probe run move back so that
   every entry stays reachable from its home cell (no tombstones). */
static void hremove(handler **cell)
{
    size_t i = (size_t)(cell - htab), j = i;
    htab[i] = NULL;
    for (;;) {
        j = (j + 1) & (hcap - 1);
        if (htab[j] == NULL)
            return;
        size_t home = htab[j]->hash & (hcap - 1);
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        htab[i] = htab[j];
        htab[j] = NULL;
        i = j;
    }
}

/* The handler for key, counted for one more plan: from the table (taken
   back from the quarantine if it waits there), else generated and placed.
   NULL with err filled. Engine lock held. */
static handler *handler_for(const nt_plan *plan, const uint8_t *key, size_t keylen, nt_error *err)
{
    uint8_t code[NT_HANDLER_MAX];
    uint64_t h = fnv1a(key, keylen);
    handler **cell = hfind(key, keylen, h);
    if (cell != NULL && *cell != NULL) {
        (*cell)->refs++;
        return *cell;
    }
    size_t len = nt_handler_gen(arch, plan, code, sizeof(code));
    if (len == 0) {
        nt_fail(err, NT_ERR_UNSUPPORTED, -1, "numthunk: handler too large for the native engine");
        return NULL;
    }
    handler *hd = calloc(1, sizeof(*hd));
    uint8_t *kcopy = malloc(keylen);
    if (hd == NULL || kcopy == NULL || (2 * (hcount + 1) > hcap && hgrow() != 0)) {
        free(hd);
        free(kcopy);
        nt_fail(err, NT_ERR_MEMORY, -1, "numthunk: out of memory");
        return NULL;
    }
    void *at = place_code(code, len, 0, err);
    if (at == NULL) {
        free(hd);
        free(kcopy);
        return NULL;
    }
    /* place_code moves on from a failing policy: the current one placed it */
    memcpy(kcopy, key, keylen);
    *hd = (handler){ h, keylen, kcopy, at, len, policy, 1, 0, 0 };
    *hfind(key, keylen, h) = hd;
    hcount++;
    return hd;
}

/* The code a released slot's description runs: the handler of a plan
   "void (const char *, const void *)" with both parameters bound, whose
   target (nt_what.trap) is nt_trap_released_at. Made once, at init; left
   NULL where it cannot be (no memory for its plan, no executable memory:
   handler_for fails then; released slots then name nothing). */
static void make_trap_handler(void)
{
    nt_error err;
    nt_error_init(&err);
    nt_sig *sig = nt_sig_parse("void (const char *, const void *)", NULL, 0, &err);
    nt_plan *plan = sig != NULL ? nt_plan_new(sig, &err) : NULL;
    if (plan != NULL) {
        nt_plan_set_bound(plan, 0);
        nt_plan_set_bound(plan, 1);
        uint8_t key[NT_SHAPE_KEY_MAX];
        if (nt_plan_finish(plan, &err) == NT_OK && nt_handler_supports(&arch->abi, plan) == NT_OK) {
            size_t keylen = nt_handler_key(&arch->abi, plan, key);
            nt_spin_lock(&lock);
            /* its reference is never dropped: the code is never evicted */
            handler *hd = handler_for(plan, key, keylen, &err);
            nt_spin_unlock(&lock);
            if (hd != NULL)
                nt_atomic_store_ptr(&trap_code, hd->code, NT_RELEASE);
        }
    }
    nt_plan_free(plan);
    nt_sig_free(sig);
}

/* Quarantine leave: no plan took the handler back meanwhile, so no call can
   be running its code any more; the code goes back to its policy. */
static void handler_leave(void *item)
{
    handler *hd = item;
    nt_spin_lock(&lock);
    if (hd->refs > 0) {
        hd->queued = hd->requeue = 0;
        nt_spin_unlock(&lock);
        return;
    }
    if (hd->requeue) {
        /* its last plan went while it waited: a full quarantine from then */
        hd->requeue = 0;
        nt_spin_unlock(&lock);
        nt_code_quarantine_push(hd, handler_leave);
        return;
    }
    hremove(hfind(hd->key, hd->keylen, hd->hash));
    hcount--;
    hd->policy->release(hd->code, hd->len);
    nt_spin_unlock(&lock);
    free(hd->key);
    free(hd);
}

/* A plan of this shape goes: the last one sends the handler to quarantine. */
static void handler_unref(const nt_plan *plan)
{
    uint8_t key[NT_SHAPE_KEY_MAX];
    size_t keylen = nt_handler_key(&arch->abi, plan, key);
    nt_spin_lock(&lock);
    handler **cell = hfind(key, keylen, fnv1a(key, keylen));
    handler *hd = cell != NULL ? *cell : NULL;
    int push = 0;
    if (hd != NULL && hd->code == plan->handler && --hd->refs == 0) {
        if (hd->queued) {
            hd->requeue = 1;
        } else {
            hd->queued = 1;
            push = 1;
        }
    }
    nt_spin_unlock(&lock);
    /* outside the engine lock: the quarantine's lock comes first */
    if (push)
        nt_code_quarantine_push(hd, handler_leave);
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */

static void *stub_of(xslot *slot)
{
    uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(NT_PAGE_SIZE - 1);
    uintptr_t index = ((uintptr_t)slot - page) / sizeof(xslot);
    return (void *)(page - block_code + index * arch->stub_size);
}

/* A slot whose stub is executable, or NULL (err filled). Engine lock. */
static xslot *take_slot(nt_error *err)
{
    if (nfree > 0)
        return free_slots[--nfree];
    if (cur_slots == NULL || cur_used == BLOCK_STUBS) {
        uint8_t *block = place_code(stub_image, block_code, BLOCK_DATA, err);
        if (block == NULL)
            return NULL;
        cur_slots = (xslot *)(block + block_code);
        cur_used = 0;
    }
    return &cur_slots[cur_used++];
}

/* Quarantine leave: the slot may now serve a new thunk. */
static void slot_leave(void *item)
{
    xslot *slot = item;
    if (slot->ctx != &released_ctx)
        nt_what_unref((nt_what *)slot->ctx);
    nt_spin_lock(&lock);
    if (nfree == free_cap) {
        size_t ncap = free_cap ? 2 * free_cap : 1024;
        xslot **nf = realloc(free_slots, ncap * sizeof(*nf));
        if (nf == NULL) {
            nt_spin_unlock(&lock);
            return; /* never reused */
        }
        free_slots = nf;
        free_cap = ncap;
    }
    free_slots[nfree++] = item;
    nt_spin_unlock(&lock);
}

/* ------------------------------------------------------------------------ */
/* libffi entries of native plans                                            */

/*
 * When no executable memory is left, a native plan's new entries are
 * libffi closures: the plan keeps the libffi data in engine_data, which
 * the native engine does not otherwise use, and each such entry names
 * libffi as its engine (nt_entry_ref), so that swap and free go there.
 */
static nt_status fallback_entry_new(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                                    nt_error *err)
{
    nt_spin_lock(&lock);
    nt_status st = NT_OK;
    if (plan->engine_data == NULL)
        st = nt_engine_ffi.prepare(plan, err);
    nt_spin_unlock(&lock);
    if (st != NT_OK)
        return st;
    return nt_engine_ffi.entry_new(plan, ctx, out, address, err);
}

/* ------------------------------------------------------------------------ */
/* The engine (nt_engine functions)                                         */

nt_status nt_native_supports(const nt_plan *plan)
{
    if (!ready() || nt_handler_supports(&arch->abi, plan) != NT_OK)
        return NT_ERR_UNSUPPORTED;
    return NT_OK;
}

nt_status nt_native_prepare(nt_plan *plan, nt_error *err)
{
    uint8_t key[NT_SHAPE_KEY_MAX];

    nt_call_once(&init_once, init);
    if (arch == NULL || nt_handler_supports(&arch->abi, plan) != NT_OK)
        return nt_fail(err, NT_ERR_UNSUPPORTED, -1,
                       "numthunk: the native engine cannot run this plan");
    size_t keylen = nt_handler_key(&arch->abi, plan, key);
    nt_error herr;
    nt_error_init(&herr);
    nt_spin_lock(&lock);
    handler *hd = handler_for(plan, key, keylen, &herr);
    nt_spin_unlock(&lock);
    void *code = hd != NULL ? hd->code : NULL;
    plan->engine_data = NULL;
    plan->handler = code;
    if (code != NULL || herr.status != NT_ERR_MEMORY)
        return code != NULL ? NT_OK : nt_fail(err, herr.status, -1, "%s", herr.msg);
    /* No executable memory left: this plan's entries will be libffi's. */
    return nt_engine_ffi.prepare(plan, err);
}

void nt_native_plan_release(nt_plan *plan)
{
    /* The handler is shared by shape and counted; the libffi data of a
       plan that fell back is the plan's own. */
    if (plan->handler != NULL)
        handler_unref(plan);
    plan->handler = NULL;
    if (plan->engine_data != NULL)
        nt_engine_ffi.plan_release(plan);
    plan->engine_data = NULL;
}

nt_status nt_native_entry_new(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                              nt_error *err)
{
    nt_call_once(&init_once, init);
    if (arch == NULL)
        return nt_fail(err, NT_ERR_UNSUPPORTED, -1, "numthunk: no native engine on this platform");
    if (plan->handler == NULL)
        return fallback_entry_new(plan, ctx, out, address, err);
    if (ctx->handler == NULL)
        ctx->handler = plan->handler;
    nt_error serr;
    nt_error_init(&serr);
    nt_spin_lock(&lock);
    xslot *slot = take_slot(&serr);
    nt_spin_unlock(&lock);
    if (slot == NULL)
        return serr.status == NT_ERR_MEMORY ? fallback_entry_new(plan, ctx, out, address, err)
                                            : nt_fail(err, serr.status, -1, "%s", serr.msg);
    /* Release: a caller that loads the slot sees the filled context. */
    nt_atomic_store_ptr(&slot->ctx, ctx, NT_RELEASE);
    out->engine = nt_engine_native;
    out->entry = (nt_entry *)slot;
    *address = stub_of(slot);
    return NT_OK;
}

void nt_native_entry_swap(nt_entry *entry, nt_ctx *ctx)
{
    nt_atomic_store_ptr(&((xslot *)entry)->ctx, ctx, NT_RELEASE);
}

void nt_native_entry_free(nt_entry *entry, nt_what *what)
{
    xslot *slot = (xslot *)entry;
    nt_ctx *tomb = &released_ctx;
    void *code = nt_atomic_load_ptr(&trap_code, NT_ACQUIRE);
    if (what != NULL && code != NULL) {
        nt_atomic_store_ptr(&what->handler, code, NT_RELAXED);
        tomb = (nt_ctx *)nt_what_ref(what);
    }
    nt_atomic_store_ptr(&slot->ctx, tomb, NT_RELEASE);
    nt_quarantine_push(slot, slot_leave);
}
