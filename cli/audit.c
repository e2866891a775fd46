/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard audit (audit.h): verdicts on every token of every LUKS2 volume
 * against the threats of docs/security.md.
 *
 * The verdicts are reasoned from what the header says a token is and from
 * what the peers table (docs/security.md, tests/adversarial/peers-table)
 * observed of each system under the interposer; they are not re-measured
 * here. The header is attacker-editable: a token that claims a PIN it does
 * not have is reported as having one, so the verdicts are what the header
 * claims at best; a header edit that removes a PIN shows up as an exposed
 * token, which is the right direction to err in.
 *
 * The threats (tpmguard(8), AUDIT):
 *   passive_sniffer    records the bus during a normal unlock;
 *   active_interposer  alters the bus: substitutes the keys the TPM returns,
 *                      sits in the middle of sessions salted to them, runs
 *                      commands of its own;
 *   tpm_reset          resets the TPM after boot and replays the boot's PCR
 *                      extends, then unseals from a system of its own;
 *   header_edit        edits the LUKS2 header or swaps in a decoy volume with
 *                      the victim's UUID that boots into the good PCR state.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <systemd/sd-device.h>

#include "boot-anchor.h"
#include "audit.h"
#include "binding.h"
#include "error.h"
#include "json-util.h"
#include "keyslot-report.h"
#include "label.h"
#include "log.h"
#include "sanitize.h"
#include "luks.h"
#include "macro.h"
#include "pending-marker.h"
#include "status.h"
#include "token.h"
#include "util.h"
#include "verify.h"

typedef enum threat {
        THREAT_PASSIVE,
        THREAT_ACTIVE,
        THREAT_RESET,
        THREAT_HEADER,
        THREAT_LEAK,
        _THREAT_MAX,
} threat;

static const char *const threat_id[_THREAT_MAX] = {
        [THREAT_PASSIVE] = "passive_sniffer",
        [THREAT_ACTIVE] = "active_interposer",
        [THREAT_RESET] = "tpm_reset",
        [THREAT_HEADER] = "header_edit",
        [THREAT_LEAK] = "leaking_tpm",
};

static const char *const threat_title[_THREAT_MAX] = {
        [THREAT_PASSIVE] = "passive sniffer",
        [THREAT_ACTIVE] = "active interposer",
        [THREAT_RESET] = "TPM reset + PCR replay",
        [THREAT_HEADER] = "header edit / decoy",
        [THREAT_LEAK] = "TPM leaks its secrets",
};

#define YES "yes"
#define NO "no"
#define NA "n/a"

typedef struct verdict {
        const char *exposed;    /* YES, NO or NA */
        char reason[320];
} verdict;

typedef struct assessment {
        const char *type;       /* the reported type: tpmguard, systemd-tpm2, clevis, systemd-fido2, ... */
        char protection[192];   /* what protects it, one line */
        int pin;                /* 1, 0, or -1 when the notion does not apply */
        verdict v[_THREAT_MAX];
        bool migratable;        /* tpmguard migrate takes it */
        bool counts;            /* a secret-bearing token (labels and markers are not) */
} assessment;

/* The machine's facts the verdicts depend on, from tg_status_tpm(). */
typedef struct facts {
        bool provisioned;
        bool verified;
        const char *verification;
        const char *anchor;
        const char *kernel_null_name;
        const char *policy;
        int lockout_auth_set;   /* 1, 0, -1 unknown (TPM unreachable) */
        bool da_weaker;
        const char *state_dir;
        tg_verified_tpm *v;     /* NULL when verification failed */
} facts;

/* A verdict and its reason (a format and its arguments). */
#define set(verdict_, exposed_, ...)                                                            \
        do {                                                                                    \
                (verdict_)->exposed = (exposed_);                                               \
                snprintf((verdict_)->reason, sizeof (verdict_)->reason, __VA_ARGS__);           \
        } while (0)

static void set_all(assessment *a, const char *exposed, const char *reason) {
        for (int t = 0; t < _THREAT_MAX; t++)
                set(&a->v[t], exposed, "%s", reason);
}

static const char *json_str(json_object *o, const char *key) {
        json_object *v;

        return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v) : NULL;
}

static int jbool(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
                return -1;
        return json_object_get_boolean(v);
}

static void facts_from_tpm(const tg_tpm_status *tpm, const tg_config *config, tg_verified_tpm *v, facts *f) {
        *f = (facts) { .lockout_auth_set = -1, .state_dir = config->state_dir };
        f->provisioned = tpm->provisioned;
        f->v = v;
        f->verification = tpm->verification >= 0 ? "verified" : tg_err_id(tpm->verification);
        f->verified = tpm->verification >= 0;
        f->anchor = tg_anchor_kind_to_string(tpm->anchor);
        f->kernel_null_name = tpm->kernel_null_name_present ? "present" : "absent";
        f->policy = tg_null_name_policy_to_string(tpm->kernel_null_name_policy);
        if (tpm->da_known) {
                f->lockout_auth_set = tpm->da.lockout_auth_set;
                f->da_weaker = tpm->da_weaker_than_configured;
        }
}

/*
 * After a TPM reset and a replay of the boot's PCR extends, the PCR policy
 * holds again for whoever boots a system of their own: no verification sees
 * that (design §9.1), only the PIN and the TPM's dictionary-attack lockout
 * stand. Without a lockout password anyone resets the DA counter and
 * searches the PIN online.
 */
static void reset_verdict(verdict *v, int pin, const facts *f, const char *detection) {
        if (pin != 1)
                set(v, YES, "no PIN: after a TPM reset and a replay of the boot's PCR extends anyone who boots a "
                    "system of their own unseals it%s", detection);
        else if (f->lockout_auth_set == 0)
                set(v, YES, "only the PIN is left after a reset and PCR replay, and the lockout hierarchy has no "
                    "password: the DA counter can be reset and the PIN searched online (run 'tpmguard lockout "
                    "setup')%s", detection);
        else if (f->lockout_auth_set < 0)
                set(v, YES, "only the PIN is left after a reset and PCR replay, and whether the lockout hierarchy "
                    "has a password is unknown (TPM unreachable)%s", detection);
        else
                set(v, NO, "after a reset and PCR replay the PIN is still needed, and the TPM's DA lockout (a "
                    "lockout password is set%s) limits the guesses%s",
                    f->da_weaker ? ", but the DA parameters are weaker than tpmguard.conf's" : "", detection);
}

/* ---- tpmguard ---- */

static void assess_tpmguard(struct crypt_device *cd, int id, const facts *f, assessment *a) {
        char policy[128], detection[160];
        bool file_exists = false, bound = false;
        tg_token t;

        a->type = "tpmguard";
        if (tg_luks_token_load(cd, id, &t) < 0) {
                snprintf(a->protection, sizeof a->protection, "malformed tpmguard token");
                set_all(a, NA, "malformed: the plugin refuses it and it unseals nothing (remove it with "
                        "'tpmguard remove --token N')");
                return;
        }
        a->pin = t.pin;
        tg_token_policy_format(&t, policy, sizeof policy);
        /* A TPM firmware flaw, a fault attack on a firmware TPM, a decapped chip (docs/security.md). */
        if (!t.pin)
                set(&a->v[THREAT_LEAK], YES, "no PIN: a TPM that leaks its secrets gives the keyslot passphrase; "
                    "format 2 gives a no-PIN token nothing (enroll with a PIN)");
        else if (tg_token_exposed_to_leaking_tpm(&t))
                set(&a->v[THREAT_LEAK], YES, "format 1: the TPM holds the keyslot passphrase itself, so a TPM that "
                    "leaks its secrets opens the volume without the PIN (run 'tpmguard change-pin' or 'tpmguard "
                    "rotate': both write format 2)");
        else
                set(&a->v[THREAT_LEAK], NO, "format 2: the keyslot passphrase needs the PIN's Argon2id (%" PRIu32
                    " MiB, %" PRIu32 " passes) as well as what the TPM holds; a leak leaves an offline search of "
                    "the PIN at that cost per guess", t.argon2.memory_kib / 1024, t.argon2.time_cost);
        explicit_bzero(&t, sizeof t);
        snprintf(a->protection, sizeof a->protection, "tpmguard: %s, sealed over sessions salted to the verified NULL key",
                 policy);

        set(&a->v[THREAT_PASSIVE], NO, "the secret and the PIN cross the bus only encrypted, in sessions salted to "
            "the NULL key certified by the pinned EK signing key");

        if (!f->provisioned)
                set(&a->v[THREAT_ACTIVE], NO, "not provisioned: the plugin unseals nothing until 'tpmguard provision' "
                    "pins the EK signing key");
        else if (a->pin != 1)
                set(&a->v[THREAT_ACTIVE], YES, "no PIN: an active interposer unseals it with commands of its own "
                    "(Load, PolicyPCR, Unseal) on any normal boot; no verified session can protect a policy that "
                    "needs no secret");
        else if (f->lockout_auth_set != 1)
                set(&a->v[THREAT_ACTIVE], YES, "an active interposer can guess the PIN with commands of its own, and "
                    "the lockout hierarchy %s: the DA counter can be reset (run 'tpmguard lockout setup')",
                    f->lockout_auth_set == 0 ? "has no password" : "may have no password (TPM unreachable)");
        else
                set(&a->v[THREAT_ACTIVE], NO, "sessions are salted only to the NULL key certified by the pinned EK "
                    "signing key (verification: %s; kernel null_name %s, policy %s), the PIN is needed and the DA "
                    "lockout limits guesses", f->verification, f->kernel_null_name, f->policy);

        /* What sees a reset during this boot (design §2.7): the plugin refuses to hand the PIN to a reset TPM. */
        snprintf(detection, sizeof detection, "; tpmguard's own unlock %s a reset (anchor %s)",
                 strcmp(f->anchor, "none") == 0 ? "does not detect" : "detects", f->anchor);
        reset_verdict(&a->v[THREAT_RESET], a->pin, f, detection);

        (void) tg_volume_binding_present(f->state_dir, crypt_get_uuid(cd), &file_exists, &bound);
        if (a->pin != 1)
                set(&a->v[THREAT_HEADER], YES, "no PIN: a decoy volume with this UUID boots a system of the "
                    "attacker's in the good PCR state, which unseals the real token");
        else if (!bound)
                set(&a->v[THREAT_HEADER], YES, "the volume is not bound to this machine: a decoy volume with its "
                    "UUID boots in the good PCR state and can ask for the PIN (run 'tpmguard bind')");
        else
                set(&a->v[THREAT_HEADER], NO, "the volume is bound (a decoy is refused) and every new seal takes "
                    "its policy from tpmguard.conf, never from the header");
}

/* ---- systemd-tpm2 (systemd-cryptenroll) ---- */

/* base64 (url: JOSE's base64url, padding optional) into a NUL-terminated buffer; *ret_size without the NUL. */
static int base64_decode(const char *in, size_t len, bool url, char **ret, size_t *ret_size) {
        _cleanup_free_ char *b64 = NULL, *out = NULL;
        size_t padded = (len + 3) / 4 * 4, pad = 0;
        int n;

        if (len == 0 || len > 65536)
                return -TG_ERR_INVALID;
        b64 = malloc(padded + 1);
        out = malloc(padded / 4 * 3 + 1);
        if (!b64 || !out)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < padded; i++)
                b64[i] = i >= len ? '=' : !url ? in[i] : in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
        b64[padded] = '\0';
        for (size_t i = padded; i > 0 && b64[i - 1] == '='; i--)
                pad++;
        n = EVP_DecodeBlock((unsigned char *) out, (const unsigned char *) b64, (int) padded);
        if (n < 0 || (size_t) n < pad)
                return -TG_ERR_INVALID;
        out[n - pad] = '\0';
        *ret_size = (size_t) n - pad;
        *ret = TAKE_PTR(out);
        return 0;
}


static void pcr_list(json_object *pcrs, char *buf, size_t size) {
        size_t n = json_object_is_type(pcrs, json_type_array) ? json_object_array_length(pcrs) : 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(buf);
                snprintf(buf + len, size - len, "%s%d", i ? "," : "",
                         json_object_get_int(json_object_array_get_idx(pcrs, i)));
        }
}

static bool pcr_list_has(json_object *pcrs, int pcr) {
        size_t n = json_object_is_type(pcrs, json_type_array) ? json_object_array_length(pcrs) : 0;

        for (size_t i = 0; i < n; i++)
                if (json_object_get_int(json_object_array_get_idx(pcrs, i)) == pcr)
                        return true;
        return false;
}

/*
 * systemd >= 255 pins the SRK it salts to (tpm2_srk: base64 of an
 * Esys_TR_Serialize()d ESYS_TR). It is safe to salt to only if it is this
 * TPM's key: certified by the pinned EK signing key (trust/verify.h).
 */
static bool srk_certified(json_object *srk, const facts *f, char *why, size_t why_size) {
        _cleanup_free_ char *blob = NULL;
        size_t size;
        int r;

        if (!f->v) {
                snprintf(why, why_size, "the TPM is not verified here (verification: %s)", f->verification);
                return false;
        }
        if (!json_object_is_type(srk, json_type_string) ||
            base64_decode(json_object_get_string(srk), (size_t) json_object_get_string_len(srk), false, &blob, &size) < 0) {
                snprintf(why, why_size, "its tpm2_srk field cannot be read");
                return false;
        }
        r = tg_vtpm_certify_persistent(f->v, f->state_dir, (const uint8_t *) blob, size, NULL);
        if (r == -TG_ERR_INTERPOSER)
                snprintf(why, why_size, "this TPM holds no such key, or the pinned EK signing key does not certify it");
        else if (r < 0)
                snprintf(why, why_size, "it could not be certified (%s)", tg_err_str(r));
        return r >= 0;
}

static void assess_systemd_tpm2(json_object *o, const facts *f, assessment *a) {
        json_object *pcrs = NULL, *srk = NULL;
        const char *bank = json_str(o, "tpm2-pcr-bank") ?: "sha256";
        char list[96], why[160];
        bool has_srk;

        a->type = "systemd-tpm2";
        a->migratable = true;
        a->pin = jbool(o, "tpm2-pin") == 1;
        (void) json_object_object_get_ex(o, "tpm2-pcrs", &pcrs);
        pcr_list(pcrs, list, sizeof list);
        /* systemd >= 255 records the SRK it salts to (tpm2_srk); 252 does not. */
        has_srk = json_object_object_get_ex(o, "tpm2_srk", &srk) && srk;
        snprintf(a->protection, sizeof a->protection, "systemd-cryptenroll: %s PCRs %s, %s%s", bank,
                 list[0] ? list : "(none)", a->pin ? "PIN" : "no PIN", has_srk ? ", pinned SRK" : "");

        set(&a->v[THREAT_PASSIVE], NO, "systemd salts its sessions and encrypts Unseal's response: a recording "
            "alone reads neither the secret nor the PIN");
        if (has_srk && !srk_certified(srk, f, why, sizeof why))
                set(&a->v[THREAT_ACTIVE], YES, "SRK not certified: the token salts to the SRK it pins (tpm2_srk), "
                    "and %s, so it may be an interposer's key%s", why,
                    a->pin ? " (the PIN then falls to an offline search)" : "");
        else if (has_srk && !a->pin)
                set(&a->v[THREAT_ACTIVE], YES, "the SRK it pins (tpm2_srk) is certified by the pinned EK signing key, "
                    "but there is no PIN: an active interposer unseals it with commands of its own on any normal boot");
        else if (has_srk)
                set(&a->v[THREAT_ACTIVE], NO, "the SRK it salts to (tpm2_srk) is this TPM's: certified by the pinned "
                    "EK signing key, so no interposer stands in its sessions, and the PIN is needed");
        else
                set(&a->v[THREAT_ACTIVE], YES, "salts its sessions to a primary key it never verifies: an interposer "
                    "that substitutes the key stands in the middle and reads the unsealed secret%s",
                    a->pin ? ", after an offline search of the PIN from the session's HMACs" : "");
        reset_verdict(&a->v[THREAT_RESET], a->pin, f, "; systemd does not detect a reset");
        if (!a->pin)
                set(&a->v[THREAT_HEADER], YES, "no PIN: a decoy volume with this UUID boots a system of the "
                    "attacker's in the good PCR state, which unseals the real token");
        else if (pcr_list_has(pcrs, 15))
                set(&a->v[THREAT_HEADER], NO, "PCR 15 is in the policy: a decoy volume (another volume key) "
                    "changes it, and the PIN is needed");
        else
                set(&a->v[THREAT_HEADER], YES, "the volume key is not in the policy (no PCR 15) and nothing binds the "
                    "volume: a decoy volume with this UUID boots in the good PCR state and can ask for the PIN");
        if (!a->pin)
                set(&a->v[THREAT_LEAK], YES, "no PIN: the TPM holds what opens the keyslot, so a TPM that leaks its "
                    "secrets opens the volume");
        else
                set(&a->v[THREAT_LEAK], NA, "not assessed: whether the PIN is mixed into the keyslot passphrase "
                    "depends on the systemd version that enrolled it ('tpmguard migrate' writes format 2, which does)");
}

/* ---- clevis ---- */

/* The "clevis" object of a JWE's protected header (compact "HEADER.…" or the header alone). */
static json_object *clevis_header(const char *protected_b64) {
        _cleanup_free_ char *text = NULL;
        const char *dot = strchr(protected_b64, '.');
        json_object *o, *c;
        size_t size;

        if (base64_decode(protected_b64, dot ? (size_t) (dot - protected_b64) : strlen(protected_b64), true, &text,
                          &size) < 0)
                return NULL;
        o = json_tokener_parse(text);
        if (!o)
                return NULL;
        if (!json_object_object_get_ex(o, "clevis", &c) || !json_object_is_type(c, json_type_object)) {
                json_object_put(o);
                return NULL;
        }
        json_object_get(c);
        json_object_put(o);
        return c;
}

/* Does this clevis pin (or an sss pin below it) use the TPM? Copies the tpm2 pin's bank and PCRs. */
static bool clevis_uses_tpm2(json_object *clevis, int depth, char *bank, size_t bank_size, char *ids, size_t ids_size) {
        const char *pin = json_str(clevis, "pin");
        json_object *sss, *jwes, *tpm2 = NULL;

        if (!pin || depth > 4)
                return false;
        if (strcmp(pin, "tpm2") == 0) {
                (void) json_object_object_get_ex(clevis, "tpm2", &tpm2);
                snprintf(bank, bank_size, "%s", json_str(tpm2, "pcr_bank") ?: "sha256");
                snprintf(ids, ids_size, "%s", json_str(tpm2, "pcr_ids") ?: "(none)");
                return true;
        }
        if (strcmp(pin, "sss") != 0 || !json_object_object_get_ex(clevis, "sss", &sss) ||
            !json_object_object_get_ex(sss, "jwe", &jwes) || !json_object_is_type(jwes, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(jwes); i++) {
                json_object *e = json_object_array_get_idx(jwes, i);
                _cleanup_json_ json_object *sub = json_object_is_type(e, json_type_string)
                                                           ? clevis_header(json_object_get_string(e)) : NULL;
                if (sub && clevis_uses_tpm2(sub, depth + 1, bank, bank_size, ids, ids_size))
                        return true;
        }
        return false;
}

static void assess_clevis(json_object *o, const facts *f, assessment *a) {
        _cleanup_json_ json_object *clevis = NULL;
        json_object *jwe;
        const char *protected = NULL, *pin;
        char bank[16], ids[64];
        bool tpm, via_sss;

        a->type = "clevis";
        a->pin = 0;
        if (json_object_object_get_ex(o, "jwe", &jwe))
                protected = json_str(jwe, "protected");
        clevis = protected ? clevis_header(protected) : NULL;
        pin = json_str(clevis, "pin");
        if (!clevis || !pin) {
                snprintf(a->protection, sizeof a->protection, "clevis (its JWE header is unreadable)");
                set_all(a, YES, "a clevis token whose pin cannot be read: not known to be safe");
                a->migratable = true;
                return;
        }
        via_sss = strcmp(pin, "sss") == 0;
        tpm = clevis_uses_tpm2(clevis, 0, bank, sizeof bank, ids, sizeof ids);
        if (!tpm) {
                snprintf(a->protection, sizeof a->protection, "clevis %s pin (not TPM-bound)", pin);
                set_all(a, NA, "not TPM-bound: this clevis pin does not use the TPM");
                a->pin = -1;
                return;
        }
        a->migratable = true;
        snprintf(a->protection, sizeof a->protection, "clevis tpm2 pin%s: %s PCRs %s, no PIN", via_sss ? " (in sss)" : "",
                 bank, ids);
        set(&a->v[THREAT_PASSIVE], YES, "clevis's tpm2 pin sends the sealed JWK in clear (Create's inSensitive at "
            "bind, Unseal's outData at every unlock): a recording decrypts the passphrase from the header's JWE");
        set(&a->v[THREAT_ACTIVE], YES, "no salted session and no verified key: an interposer reads the sealed JWK "
            "in clear, as a passive one does");
        reset_verdict(&a->v[THREAT_RESET], 0, f, "; clevis does not detect a reset");
        set(&a->v[THREAT_HEADER], YES, "no PIN: a decoy volume with this UUID boots a system of the attacker's in "
            "the good PCR state, which unseals the real token");
        set(&a->v[THREAT_LEAK], YES, "no PIN: the TPM holds the JWK that opens the keyslot, so a TPM that leaks "
            "its secrets opens the volume");
}

/*
 * A keyslot tpmguard migrate kept (label.h: TG_KEPT_TOKEN_TYPE): the old
 * token is gone, but its secret, which crossed the bus at every unlock
 * before the migration (and once more for the proof), still opens the
 * keyslot unless nothing proved the keyslot the token's because it is a
 * passphrase's. The verdicts are about that secret, already spent: a
 * recording or an interposer of those unlocks holds it.
 */
static void assess_kept(struct crypt_device *cd, int id, json_object *o, assessment *a) {
        const char *was = json_str(o, "was");
        bool clevis = was && strcmp(was, "clevis") == 0;

        a->type = TG_KEPT_TOKEN_TYPE;
        a->pin = -1;
        if (tg_luks_token_active_keyslot(cd, id) < 0) {
                a->counts = false;
                snprintf(a->protection, sizeof a->protection, "label of a kept keyslot that is gone (no secret; "
                         "'tpmguard cleanup' removes it)");
                set_all(a, NA, "a label: it holds no secret, and the keyslot it named is gone");
                return;
        }
        snprintf(a->protection, sizeof a->protection, "keyslot kept by tpmguard migrate: the removed %.32s token's "
                 "secret may still open it (nothing proved it the token's)", was ?: "old");
        if (clevis)
                set(&a->v[THREAT_PASSIVE], YES, "clevis's tpm2 pin sent the sealed JWK in clear at every unlock "
                    "before the migration: a recording of one, with the header of then, gives the secret");
        else
                set(&a->v[THREAT_PASSIVE], NO, "systemd salted its sessions: a recording alone did not read the secret");
        set(&a->v[THREAT_ACTIVE], YES, "the old token's sessions were salted to a key nobody verified: an interposer "
            "of any unlock before the migration may hold the secret, and one may have made migrate's proof fail");
        set(&a->v[THREAT_RESET], YES, "the old token did not detect a reset: a reset and replay before the migration "
            "may have unsealed the secret");
        set(&a->v[THREAT_HEADER], YES, "a secret unsealed before the migration opens this keyslot whatever the "
            "header says now");
}

/* ---- every token ---- */

static void assess_token(struct crypt_device *cd, int id, const char *type, json_object *o, const facts *f,
                         assessment *a) {
        *a = (assessment) { .pin = -1, .counts = true };
        /* The TPM tokens of other tools hand the keyslot passphrase to the TPM (assessed there); the rest
         * do not depend on it. */
        set(&a->v[THREAT_LEAK], NA, "not TPM-bound");
        if (strcmp(type, TG_TOKEN_TYPE) == 0)
                assess_tpmguard(cd, id, f, a);
        else if (strcmp(type, "systemd-tpm2") == 0)
                assess_systemd_tpm2(o, f, a);
        else if (strcmp(type, "clevis") == 0)
                assess_clevis(o, f, a);
        else if (strcmp(type, "systemd-fido2") == 0 || strcmp(type, "systemd-pkcs11") == 0) {
                a->type = type;
                snprintf(a->protection, sizeof a->protection, "%s: the secret needs the %s", type,
                         strcmp(type, "systemd-fido2") == 0 ? "FIDO2 security key" : "PKCS#11 token (smart card)");
                set_all(a, NA, "not TPM-bound: the secret is released by a separate device, not the TPM");
        } else if (strcmp(type, TG_RECOVERY_TOKEN_TYPE) == 0) {
                a->type = type;
                a->counts = false;
                snprintf(a->protection, sizeof a->protection, "label of a recovery key (no secret)");
                set_all(a, NA, "a label: it holds no secret");
        } else if (strcmp(type, TG_KEPT_TOKEN_TYPE) == 0)
                assess_kept(cd, id, o, a);
        else if (strcmp(type, TG_PENDING_TOKEN_TYPE) == 0) {
                a->type = type;
                a->counts = false;
                snprintf(a->protection, sizeof a->protection, "an interrupted tpmguard operation (no secret)");
                set_all(a, NA, "a pending marker: it holds no secret ('tpmguard cleanup' resolves it)");
        } else {
                a->type = "unknown";
                snprintf(a->protection, sizeof a->protection, "token type \"%.64s\" unknown to tpmguard", type);
                set_all(a, YES, "unknown token type: nothing known protects it, so it is not counted as safe");
        }
}

static json_object *verdicts_json(const assessment *a) {
        json_object *o = json_object_new_object();

        for (int t = 0; o && t < _THREAT_MAX; t++) {
                json_object *v = json_object_new_object();
                if (!v)
                        break;
                json_object_object_add(v, "exposed", json_object_new_string(a->v[t].exposed));
                json_object_object_add(v, "reason", json_object_new_string(a->v[t].reason));
                json_object_object_add(o, threat_id[t], v);
        }
        return o;
}

static bool assessment_exposed(const assessment *a) {
        for (int t = 0; t < _THREAT_MAX; t++)
                if (strcmp(a->v[t].exposed, YES) == 0)
                        return true;
        return false;
}

static json_object *keyslot_list(struct crypt_device *cd, int id) {
        json_object *arr = json_object_new_array();

        for (int k = 0; arr && k < tg_luks_keyslots_max(); k++)
                if (tg_luks_token_references(cd, id, k))
                        json_object_array_add(arr, json_object_new_int(k));
        return arr;
}

static int audit_volume(const char *device, const facts *f, json_object **ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *tokens = json_object_new_array(), *keyslots = json_object_new_array();
        bool exposed = false;
        int r;

        if (!o || !tokens || !keyslots) {
                json_object_put(tokens);
                json_object_put(keyslots);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(o, "device", json_object_new_string(device));
        json_object_object_add(o, "tokens", tokens);
        json_object_object_add(o, "keyslots", keyslots);
        r = tg_luks_open(device, &cd);
        if (r < 0) {
                json_object_object_add(o, "error", json_object_new_string(tg_err_id(r)));
                json_object_object_add(o, "exposed", json_object_new_boolean(false));
                *ret = TAKE_PTR(o);
                return r;
        }
        json_object_object_add(o, "uuid", json_object_new_string(crypt_get_uuid(cd) ?: ""));

        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                _cleanup_json_ json_object *parsed = NULL;
                const char *type = NULL, *json = NULL;
                crypt_token_info info = crypt_token_status(cd, id, &type);
                json_object *e;
                assessment a;

                if (info == CRYPT_TOKEN_INACTIVE || info == CRYPT_TOKEN_INVALID || !type)
                        continue;
                if (crypt_token_json_get(cd, id, &json) >= 0 && json)
                        parsed = json_tokener_parse(json);
                assess_token(cd, id, type, parsed, f, &a);
                e = json_object_new_object();
                if (!e)
                        return -TG_ERR_NOMEM;
                json_object_array_add(tokens, e);
                json_object_object_add(e, "token", json_object_new_int(id));
                json_object_object_add(e, "type", json_object_new_string(a.type));
                if (strcmp(a.type, "unknown") == 0)
                        json_object_object_add(e, "declared_type", json_object_new_string(type));
                json_object_object_add(e, "keyslots", keyslot_list(cd, id));
                json_object_object_add(e, "protection", json_object_new_string(a.protection));
                json_object_object_add(e, "pin", a.pin < 0 ? NULL : json_object_new_boolean(a.pin));
                json_object_object_add(e, "verdicts", verdicts_json(&a));
                json_object_object_add(e, "exposed", json_object_new_boolean(a.counts && assessment_exposed(&a)));
                if (a.counts && assessment_exposed(&a)) {
                        _cleanup_free_ char *next = NULL;

                        exposed = true;
                        if (a.migratable)
                                (void) tg_asprintf(&next, "tpmguard migrate --token %d %s", id, device);
                        else if (strcmp(a.type, TG_KEPT_TOKEN_TYPE) == 0) {
                                int k = tg_luks_token_active_keyslot(cd, id);
                                (void) tg_asprintf(&next, "if no passphrase or recovery key of yours opens keyslot %d: "
                                                   "cryptsetup luksKillSlot %s %d; then tpmguard cleanup %s", k,
                                                   device, k, device);
                        }
                        else if (strcmp(a.type, TG_TOKEN_TYPE) == 0)
                                next = strdup("see the reasons: a PIN ('tpmguard reseal'), format 2 ('tpmguard "
                                              "change-pin'), 'tpmguard lockout setup', 'tpmguard bind'");
                        if (next)
                                json_object_object_add(e, "next_step", json_object_new_string(next));
                }
        }

        /* Pending markers are no token's users: a keyslot only a marker names is reported as a passphrase. */
        r = tg_luks_keyslots_describe(cd, false, keyslots);
        if (r < 0)
                return r;
        json_object_object_add(o, "exposed", json_object_new_boolean(exposed));
        *ret = TAKE_PTR(o);
        return 0;
}

/* ---- the volumes of the machine ---- */

/*
 * Every LUKS2 block device: udev's ID_FS_TYPE where udev has probed the
 * device; where it has not (no udev database: a container, an early initrd)
 * libcryptsetup's own probe of the header, which reads and changes nothing.
 * Partitions and whole disks alike; device-mapper devices are skipped unless
 * udev says they carry LUKS (a LUKS volume inside an opened one).
 */
static int enumerate_luks(char ***ret, size_t *ret_n) {
        _cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *e = NULL;
        char **list = NULL;
        size_t n = 0;
        int r;

        r = sd_device_enumerator_new(&e);
        if (r >= 0)
                r = sd_device_enumerator_add_match_subsystem(e, "block", true);
        /* Devices udev has not seen too: without a udev database the enumerator would list none. */
        if (r >= 0)
                r = sd_device_enumerator_allow_uninitialized(e);
        if (r < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot enumerate block devices: %s", strerror(-r));
        for (sd_device *d = sd_device_enumerator_get_device_first(e); d; d = sd_device_enumerator_get_device_next(e)) {
                const char *node = NULL, *fs = NULL;
                int initialized;
                bool luks;
                char **grown;

                if (sd_device_get_devname(d, &node) < 0 || !node)
                        continue;
                initialized = sd_device_get_is_initialized(d);
                if (initialized > 0)
                        luks = sd_device_get_property_value(d, "ID_FS_TYPE", &fs) >= 0 && fs &&
                               strcmp(fs, "crypto_LUKS") == 0;
                else {
                        struct crypt_device *cd = NULL;
                        luks = crypt_init(&cd, node) >= 0 && crypt_load(cd, CRYPT_LUKS, NULL) >= 0;
                        crypt_free(cd);
                }
                if (!luks)
                        continue;
                grown = realloc(list, (n + 2) * sizeof *list);
                if (!grown)
                        goto nomem;
                list = grown;
                list[n] = strdup(node);
                if (!list[n])
                        goto nomem;
                list[++n] = NULL;
        }
        *ret = list;
        *ret_n = n;
        return 0;
nomem:
        for (size_t i = 0; i < n; i++)
                free(list[i]);
        free(list);
        return -TG_ERR_NOMEM;
}

/*
 * libcryptsetup's own lines (for example "Device /dev/vda does not exist or access denied." for every
 * listed block device without a node that the enumeration probes) are not tpmguard's verdict: they go
 * to the debug log (-vv), control characters replaced (a header field may be quoted in them), so
 * that standard error holds tpmguard's lines only.
 */
static void cryptsetup_log(int level, const char *msg, void *userdata) {
        _cleanup_free_ char *line = msg ? strdup(msg) : NULL;
        size_t n;

        (void) level;
        (void) userdata;
        if (!line)
                return;
        n = strlen(line);
        if (n > 0 && line[n - 1] == '\n')
                line[n - 1] = '\0';
        log_debug("libcryptsetup: %s", tg_str_sanitize_line(line));
}

static int audit_run(const tg_config *config, char **devices, size_t n_devices, json_object **ret,
                     int *ret_first_error) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *volumes = json_object_new_array(), *tpm;
        char **found = NULL;
        size_t n_found = 0;
        bool exposed = false;
        tg_tpm_status tpm_status;
        facts f;
        int r = 0, first_error = 0;

        if (!o || !volumes) {
                json_object_put(volumes);
                return -TG_ERR_NOMEM;
        }
        tg_status_tpm(config, &tpm_status, &v);
        tpm = tg_tpm_status_to_json(&tpm_status);
        if (!tpm) {
                json_object_put(volumes);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(o, "machine", tpm);
        json_object_object_add(o, "volumes", volumes);
        facts_from_tpm(&tpm_status, config, v, &f);

        if (n_devices == 0) {
                r = enumerate_luks(&found, &n_found);
                if (r < 0)
                        return r;
                devices = found;
                n_devices = n_found;
        }
        for (size_t i = 0; i < n_devices; i++) {
                json_object *vol = NULL;
                int q = audit_volume(devices[i], &f, &vol);
                if (vol) {
                        json_object_array_add(volumes, vol);
                        exposed = exposed || jbool(vol, "exposed") == 1;
                }
                if (q < 0 && q != -TG_ERR_NOMEM) {
                        log_warning("%s was not audited: %s.", devices[i], tg_err_str(q));
                        if (first_error == 0)
                                first_error = q;
                } else if (q < 0) {
                        r = q;
                        break;
                }
        }
        for (size_t i = 0; i < n_found; i++)
                free(found[i]);
        free(found);
        if (r < 0)
                return r;
        json_object_object_add(o, "exposed", json_object_new_boolean(exposed));
        json_object_object_add(o, "complete", json_object_new_boolean(first_error == 0));
        *ret = TAKE_PTR(o);
        if (ret_first_error)
                *ret_first_error = first_error;
        return 0;
}

int tg_audit(const tg_config *config, char **devices, size_t n_devices, json_object **ret, int *ret_first_error) {
        int r;

        crypt_set_log_callback(NULL, cryptsetup_log, NULL);
        r = audit_run(config, devices, n_devices, ret, ret_first_error);
        crypt_set_log_callback(NULL, NULL, NULL);
        return r;
}

bool tg_audit_exposed(json_object *audit) {
        return jbool(audit, "exposed") == 1;
}

void tg_audit_print(json_object *audit, FILE *f) {
        json_object *machine = NULL, *volumes = NULL, *da = NULL;
        size_t n_exposed = 0, n_volumes;

        (void) json_object_object_get_ex(audit, "machine", &machine);
        fprintf(f, "Machine: TPM %s, %s; verification: %s; kernel null_name: %s (policy: %s); reset anchor: %s\n",
                jbool(machine, "provisioned") == 1 ? "provisioned" : "not provisioned",
                json_str(machine, "verification") && strcmp(json_str(machine, "verification"), "verified") == 0
                        ? "verified" : "NOT verified",
                json_str(machine, "verification") ?: "?", json_str(machine, "kernel_null_name") ?: "?",
                json_str(machine, "kernel_null_name_policy") ?: "?", json_str(machine, "anchor") ?: "?");
        if (json_object_object_get_ex(machine, "dictionary_attack", &da) && da) {
                json_object *x;
                int set_ = jbool(da, "lockout_auth_set"), held = jbool(da, "lockout_auth_held");
                fprintf(f, "  lockout password: %s", set_ == 0 ? "NONE (anyone can reset the DA counter)"
                                                    : set_ < 0 ? "unknown"
                                                    : held == 1 ? "set, held by tpmguard" : "set by another owner");
                if (json_object_object_get_ex(da, "max_failures", &x))
                        fprintf(f, "; DA: lockout after %d failures", json_object_get_int(x));
                if (json_object_object_get_ex(da, "recovery_seconds", &x))
                        fprintf(f, ", one forgiven every %d s", json_object_get_int(x));
                if (jbool(da, "weaker_than_configured") == 1)
                        fprintf(f, " (weaker than tpmguard.conf)");
                fprintf(f, "\n");
        } else
                fprintf(f, "  DA: unknown (TPM unreachable)\n");

        (void) json_object_object_get_ex(audit, "volumes", &volumes);
        n_volumes = json_object_array_length(volumes);
        if (n_volumes == 0)
                fprintf(f, "No LUKS2 volume found.\n");
        for (size_t i = 0; i < n_volumes; i++) {
                json_object *vol = json_object_array_get_idx(volumes, i), *tokens = NULL, *keyslots = NULL;

                fprintf(f, "Volume %s", json_str(vol, "device") ?: "?");
                if (json_str(vol, "error")) {
                        fprintf(f, ": not audited (%s)\n", json_str(vol, "error"));
                        continue;
                }
                fprintf(f, " (UUID %s)\n", json_str(vol, "uuid") ?: "?");
                (void) json_object_object_get_ex(vol, "tokens", &tokens);
                if (json_object_array_length(tokens) == 0)
                        fprintf(f, "  no token\n");
                for (size_t k = 0; k < json_object_array_length(tokens); k++) {
                        json_object *t = json_object_array_get_idx(tokens, k), *id, *slots, *verdicts;
                        bool ex = jbool(t, "exposed") == 1;

                        json_object_object_get_ex(t, "token", &id);
                        json_object_object_get_ex(t, "keyslots", &slots);
                        json_object_object_get_ex(t, "verdicts", &verdicts);
                        fprintf(f, "  token %d %s (keyslot", json_object_get_int(id), json_str(t, "type") ?: "?");
                        for (size_t s = 0; s < json_object_array_length(slots); s++)
                                fprintf(f, "%s%d", s ? "," : " ", json_object_get_int(json_object_array_get_idx(slots, s)));
                        if (json_object_array_length(slots) == 0)
                                fprintf(f, " none");
                        fprintf(f, "): %s%s\n", json_str(t, "protection") ?: "", ex ? " — EXPOSED" : "");
                        for (int th = 0; th < _THREAT_MAX; th++) {
                                json_object *v = NULL;
                                const char *e;
                                json_object_object_get_ex(verdicts, threat_id[th], &v);
                                e = json_str(v, "exposed") ?: "?";
                                fprintf(f, "    %-24s %-4s %s\n", threat_title[th],
                                        strcmp(e, YES) == 0 ? "YES" : e, json_str(v, "reason") ?: "");
                        }
                        if (ex)
                                n_exposed++;
                        if (json_str(t, "next_step"))
                                fprintf(f, "    next step: %s\n", json_str(t, "next_step"));
                }
                (void) json_object_object_get_ex(vol, "keyslots", &keyslots);
                fprintf(f, "  keyslots:");
                for (size_t k = 0; k < json_object_array_length(keyslots); k++) {
                        json_object *e = json_object_array_get_idx(keyslots, k), *x;
                        json_object_object_get_ex(e, "keyslot", &x);
                        fprintf(f, " %d(%s)", json_object_get_int(x), json_str(e, "kind") ?: "?");
                }
                fprintf(f, "\n");
        }
        if (n_exposed > 0)
                fprintf(f, "EXPOSED: %zu token%s (exit status 21).\n", n_exposed, n_exposed == 1 ? "" : "s");
        else
                fprintf(f, "Nothing exposed.\n");
}
