/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_tpm2_types.h>

/*
 * The pinned EK signing key: written once by `tpmguard provision` into
 * state_dir/ek-signing-key.json (root-owned, copied into the initrd), read at
 * every verification. It is the trust anchor of every boot, so loading is
 * strict: the public area must unmarshal exactly, must be the EK signing key
 * template, and must hash to the recorded name.
 */
#define TG_PINNED_FILE_NAME "ek-signing-key.json"
#define TG_PINNED_MAX_SIZE (64 * 1024)

typedef struct tg_pinned_key {
        TPM2B_PUBLIC public;      /* the EK signing key's public area */
        TPM2B_NAME name;          /* its name, recomputed and checked on load */
        /* Provenance, informational: how the key was proven. */
        uint32_t ek_nv_index;     /* 0: EK certificate came from a file */
        char ek_template[32];
        char ek_cert_sha256[65];
        char ek_cert_issuer[256];
        char ek_anchor_vendor[64]; /* vendor of the root CA the EK certificate chained to */
        char ek_anchor_sha256[65]; /* that root's SHA-256, hex */
        char provisioned_at[32];  /* RFC 3339, UTC */
        /*
         * Pinned on first use (provision --trust-on-first-use): no EK certificate
         * proved the key a TPM's. Recorded as "ek_trust": "trust-on-first-use";
         * verify, status and doctor say so every time.
         */
        bool tofu;
        /*
         * Where provisioning persisted the key (0: not persisted; verification re-creates it).
         * Not trusted for anything but finding the key: verification reads the public area at
         * this handle and uses the key only if its name is the pinned name (verify.c).
         */
        uint32_t persistent_handle;
} tg_pinned_key;

#define TG_PINNED_TRUST_CERT "ek-certificate"
#define TG_PINNED_TRUST_TOFU "trust-on-first-use"
static inline const char *tg_pinned_trust(const tg_pinned_key *key) {
        return key->tofu ? TG_PINNED_TRUST_TOFU : TG_PINNED_TRUST_CERT;
}

int tg_pinned_key_parse(const char *json, size_t size, tg_pinned_key *ret);
int tg_pinned_key_load(const char *state_dir, tg_pinned_key *ret);
int tg_pinned_key_format(const tg_pinned_key *key, char **ret);
int tg_pinned_key_save(const char *dir, const tg_pinned_key *key);
/* True when the public area is exactly our EK signing key template with an ECC P-256 point. */
int tg_pinned_public_check(const TPMT_PUBLIC *public);
