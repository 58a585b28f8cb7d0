/*
 * The quarantine (src/life/quarantine.c) on its own, against its contract in
 * src/life/quarantine.h, with a quarantine of Q releases set here:
 *
 * - a released entry leaves during the Q-th release after its own, in
 *   release order;
 * - handler code leaves once more than Q entries were released after it
 *   came, so never before an entry released just after it;
 * - one release hands out at most three items (an entry and code, or code
 *   alone), the oldest first; the rest wait for the next releases;
 * - with no_reuse nothing ever leaves.
 *
 * The expected schedule comes from a model of those rules written here.
 * Built with ASan and UBSan (tests/test_core_c.py):
 *
 *   gcc -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc \
 *       src/life/quarantine.c src/life/fork.c tests/c/test_quarantine.c -lpthread
 *   ./a.out && ./a.out noreuse
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "engine/native.h"
#include "life/quarantine.h"

#define Q 8
#define MAX_LOG 4096

static nt_config config;

const nt_config *nt_config_get(void)
{
    return &config;
}

typedef struct {
    char kind; /* 'e' an entry, 'c' handler code */
    long id;
    long release; /* the release during which it left */
} leave_rec;

static leave_rec got[MAX_LOG], want[MAX_LOG];
static int ngot, nwant;
static long now; /* releases so far: set before each push */

static void note(char kind, void *item)
{
    if (ngot < MAX_LOG)
        got[ngot++] = (leave_rec){ kind, (long)(intptr_t)item, now };
}

static void leave_entry(void *item)
{
    note('e', item);
}

static void leave_code(void *item)
{
    note('c', item);
}

/* The model: rings of ids with the release count each came at. */
static long m_entries[MAX_LOG], m_entry_at[MAX_LOG], m_code[MAX_LOG], m_code_at[MAX_LOG];
static int m_eh, m_en, m_ch, m_cn;

static void expect(char kind, long id)
{
    if (nwant < MAX_LOG)
        want[nwant++] = (leave_rec){ kind, id, now };
}

static void release(long id)
{
    now++;
    m_entries[m_en] = id;
    m_entry_at[m_en++] = now;
    int out = 0;
    if (!config.no_reuse) {
        if (m_en - m_eh > Q) {
            expect('e', m_entries[m_eh++]);
            out++;
        }
        while (out < 3 && m_ch < m_cn && now - m_code_at[m_ch] > Q) {
            expect('c', m_code[m_ch++]);
            out++;
        }
    }
    nt_quarantine_push((void *)(intptr_t)id, leave_entry);
}

static void retire_code(long id)
{
    m_code[m_cn] = id;
    m_code_at[m_cn++] = now;
    nt_code_quarantine_push((void *)(intptr_t)id, leave_code);
}

int main(int argc, char **argv)
{
    config.quarantine = Q;
    config.no_reuse = argc > 1 && strcmp(argv[1], "noreuse") == 0;
    long id = 1;
    /* entries alone, past the ring's first fill */
    for (int k = 0; k < 3 * Q; k++)
        release(id++);
    /* five handlers retired at once: more than one release hands out */
    for (int k = 0; k < 5; k++)
        retire_code(1000 + k);
    for (int k = 0; k < Q + 4; k++)
        release(id++);
    /* handlers retired between releases, one falling due per release */
    for (int k = 0; k < 6; k++) {
        retire_code(2000 + k);
        release(id++);
    }
    /* many handlers at once: three a release while entries leave too */
    for (int k = 0; k < 9; k++)
        retire_code(3000 + k);
    for (int k = 0; k < 2 * Q + 8; k++)
        release(id++);

    CHECK(ngot == nwant, "%d items left, %d expected", ngot, nwant);
    for (int k = 0; k < ngot && k < nwant; k++)
        CHECK(got[k].kind == want[k].kind && got[k].id == want[k].id
                  && got[k].release == want[k].release,
              "leave %d: %c%ld at release %ld, expected %c%ld at release %ld", k,
              got[k].kind, got[k].id, got[k].release, want[k].kind, want[k].id,
              want[k].release);
    if (config.no_reuse)
        CHECK(ngot == 0, "NUMTHUNK_NO_REUSE: %d items left", ngot);
    else
        CHECK(nwant > 3 * Q, "the model expected only %d items to leave", nwant);
    if (failures == 0)
        printf("quarantine: %d items left as the contract says (%s)\n", ngot,
               config.no_reuse ? "no reuse" : "quarantine 8");
    return failures != 0;
}
