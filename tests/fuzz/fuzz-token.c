/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The LUKS2 token (attacker-writable header), formats 1 and 2:
 * tg_token_from_string on arbitrary text. Whatever it accepts must satisfy the documented invariants
 * (checked here, independently of token.c), survive the writer and parse
 * back to the same token, and its luksDump lines must format.
 */
#include <assert.h>

#include "fuzz.h"
#include "policy.h"
#include "token.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

static void dump_discard(const char *line, void *userdata) {
        (void) strlen(line);
}

static int alternates_equal(const tg_token *a, const tg_token *b) {
        if (a->n_alt != b->n_alt)
                return 0;
        for (unsigned i = 0; i < a->n_alt; i++) {
                const tg_token_alt *x = &a->alt[i], *y = &b->alt[i];

                if (x->kind != y->kind || x->reset_count_max != y->reset_count_max || x->pcr_mask != y->pcr_mask ||
                    x->pcr_digest.size != y->pcr_digest.size ||
                    memcmp(x->pcr_digest.buffer, y->pcr_digest.buffer, x->pcr_digest.size) != 0 ||
                    x->private_blob.size != y->private_blob.size ||
                    memcmp(x->private_blob.buffer, y->private_blob.buffer, x->private_blob.size) != 0 ||
                    memcmp(&x->public_blob.publicArea, &y->public_blob.publicArea, sizeof x->public_blob.publicArea) != 0)
                        return 0;
        }
        return 1;
}

static int token_equal(const tg_token *a, const tg_token *b) {
        return a->version == b->version &&
               a->private_blob.size == b->private_blob.size &&
               memcmp(a->private_blob.buffer, b->private_blob.buffer, a->private_blob.size) == 0 &&
               memcmp(&a->public_blob.publicArea, &b->public_blob.publicArea, sizeof a->public_blob.publicArea) == 0 &&
               a->pcr_bank == b->pcr_bank && a->pcr_mask == b->pcr_mask &&
               a->policy_hash.size == b->policy_hash.size &&
               memcmp(a->policy_hash.buffer, b->policy_hash.buffer, a->policy_hash.size) == 0 &&
               a->pin == b->pin && a->pin_kdf_iterations == b->pin_kdf_iterations &&
               a->argon2.time_cost == b->argon2.time_cost && a->argon2.memory_kib == b->argon2.memory_kib &&
               a->argon2.parallel == b->argon2.parallel &&
               memcmp(a->pin_salt, b->pin_salt, sizeof a->pin_salt) == 0 &&
               a->parent_name.size == b->parent_name.size &&
               memcmp(a->parent_name.name, b->parent_name.name, a->parent_name.size) == 0 &&
               a->ek_signing_key_name.size == b->ek_signing_key_name.size &&
               memcmp(a->ek_signing_key_name.name, b->ek_signing_key_name.name, a->ek_signing_key_name.size) == 0 &&
               a->keyslot == b->keyslot && alternates_equal(a, b);
}

/* What docs/token-format.md promises about every accepted token, checked independently of token.c. */
static void check_invariants(const tg_token *t) {
        if (t->version != 1 && t->version != 2)
                abort();
        if (t->pcr_mask == 0 || (t->pcr_mask >> 24) != 0)      /* PCRs 0..23, at least one */
                abort();
        if (t->keyslot < -1 || t->keyslot > 31)                 /* LUKS2 keyslots 0..31, or none */
                abort();
        if (t->policy_hash.size != 32)
                abort();
        if (t->parent_name.size != 34 || t->parent_name.name[0] != 0x00 || t->parent_name.name[1] != 0x0b)
                abort();
        if (t->ek_signing_key_name.size != 0 && t->ek_signing_key_name.size != 34)
                abort();
        /* Format 1: PBKDF2 iterations in bounds, or none without a PIN. */
        if (t->version == 1 && (t->pin ? (t->pin_kdf_iterations < TG_PIN_KDF_ITERATIONS_MIN ||
                                          t->pin_kdf_iterations > TG_PIN_KDF_ITERATIONS_MAX)
                                       : t->pin_kdf_iterations != 0))
                abort();
        /* Format 2: a PIN token whose Argon2id is within the bounds the unlock may spend
         * (32 MiB..1 GiB, 1..64 passes, 1..4 lanes), checked before any TPM command. */
        if (t->version == 2 && (!t->pin || t->argon2.memory_kib < 32u * 1024u || t->argon2.memory_kib > 1024u * 1024u ||
                                t->argon2.time_cost < 1 || t->argon2.time_cost > 64 ||
                                t->argon2.parallel < 1 || t->argon2.parallel > 4))
                abort();
        if (t->version == 1 && (t->argon2.time_cost | t->argon2.memory_kib | t->argon2.parallel) != 0)
                abort();
        if (t->private_blob.size == 0 || t->private_blob.size > sizeof t->private_blob.buffer)
                abort();
        if ((t->public_blob.publicArea.objectAttributes & TG_SEALED_ATTRIBUTES_REQUIRED) != TG_SEALED_ATTRIBUTES_REQUIRED)
                abort();
        if (t->pin && (t->public_blob.publicArea.objectAttributes & TPMA_OBJECT_NODA))
                abort();                                        /* a PIN-protected object counts towards DA */
        /* Update seals: at most two, one of each kind, only in a format 2 PIN token, each a DA-protected
         * sealed object whose authPolicy is the policy its fields describe (the grace's bound, the
         * predicted digest), so no edit of the header widens one. */
        if (t->n_alt > TG_ALT_MAX || (t->n_alt > 0 && (t->version != 2 || !t->pin)))
                abort();
        for (unsigned i = 0; i < t->n_alt; i++) {
                const tg_token_alt *a = &t->alt[i];
                TPM2B_DIGEST policy;

                if (a->kind != TG_ALT_GRACE && a->kind != TG_ALT_PREDICTED)
                        abort();
                if (i == 1 && a->kind == t->alt[0].kind)
                        abort();
                if (a->kind == TG_ALT_GRACE ? tg_policy_digest_grace(a->reset_count_max, t->pcr_bank, a->pcr_mask,
                                                                &a->pcr_digest, &policy) != 0 :
                    tg_policy_digest_compute(t->pcr_bank, t->pcr_mask, &a->pcr_digest, true, &policy) != 0)
                        abort();
                if (a->public_blob.publicArea.authPolicy.size != 32 ||
                    memcmp(a->public_blob.publicArea.authPolicy.buffer, policy.buffer, 32) != 0)
                        abort();
                if ((a->public_blob.publicArea.objectAttributes & TG_SEALED_ATTRIBUTES_REQUIRED) !=
                    TG_SEALED_ATTRIBUTES_REQUIRED || (a->public_blob.publicArea.objectAttributes & TPMA_OBJECT_NODA) ||
                    a->private_blob.size == 0)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = fuzz_strndup(data, size), *again = NULL;
        tg_token t, u;

        if (!text)
                return 0;
        if (tg_token_from_string(text, &t) == 0) {
                check_invariants(&t);
                tg_token_dump(&t, dump_discard, NULL);
                /* Round trip: accepted → written → accepted, unchanged. */
                if (tg_token_to_string(&t, &again) != 0)
                        abort();
                if (tg_token_from_string(again, &u) != 0 || !token_equal(&t, &u))
                        abort();
                free(again);
        }
        free(text);
        return 0;
}
