/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "pinned.h"
#include "tpm.h"
#include "util.h"


int tg_pinned_public_check(const TPMT_PUBLIC *public) {
        TPM2B_PUBLIC tmpl;
        uint8_t a[sizeof(TPMT_PUBLIC)], b[sizeof(TPMT_PUBLIC)];
        size_t a_size = 0, b_size = 0;
        TPMT_PUBLIC stripped = *public;

        /* Compare the marshalled template fields: everything but the point. */
        tg_template_ek_signing_key(&tmpl);
        stripped.unique.ecc.x.size = 0;
        stripped.unique.ecc.y.size = 0;
        if (public->type != TPM2_ALG_ECC ||
            Tss2_MU_TPMT_PUBLIC_Marshal(&stripped, a, sizeof a, &a_size) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPMT_PUBLIC_Marshal(&tmpl.publicArea, b, sizeof b, &b_size) != TSS2_RC_SUCCESS ||
            a_size != b_size || memcmp(a, b, a_size) != 0)
                return log_error_rc(-TG_ERR_INVALID, "The pinned key is not an EK signing key (template mismatch).");
        if (public->unique.ecc.x.size != 32 || public->unique.ecc.y.size != 32)
                return log_error_rc(-TG_ERR_INVALID, "The pinned key's ECC point is not P-256 sized.");
        return 0;
}

static int get_string(json_object *o, const char *key, bool required, const char **ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *v;
        int r;

        r = tg_json_get(o, key, json_type_string, required, &v, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"%s\" %s.", key, problem);
        if (r < 0)
                return r;
        *ret = v ? json_object_get_string(v) : NULL;
        return 0;
}

static void copy_info(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ? src : "");
}

int tg_pinned_key_parse(const char *json, size_t size, tg_pinned_key *ret) {
        _cleanup_(json_object_putp) json_object *root = NULL;
        _cleanup_free_ uint8_t *pub_bytes = NULL, *name_bytes = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        const char *s;
        size_t pub_size, name_size;
        int64_t version, nv_index = 0, handle = 0;
        bool present = false;
        tg_pinned_key key = {};
        TPM2B_NAME computed;
        int r;

        if (size > TG_PINNED_MAX_SIZE)
                return log_error_rc(-TG_ERR_INVALID, "pinned key file is larger than %u bytes.", TG_PINNED_MAX_SIZE);
        r = tg_json_parse_object(json, size, &root, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file %s.", problem);
        if (r < 0)
                return r;

        r = tg_json_get_int(root, "version", 1, 1, true, &version, NULL, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"version\" %s (this tpmguard reads version 1).", problem);
        if (r < 0)
                return r;

        r = tg_json_get_hex(root, "public", 1, sizeof(TPM2B_PUBLIC), true, &pub_bytes, &pub_size, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"public\" %s.", problem);
        if (r < 0)
                return r;
        r = tg_tpm2b_public_unmarshal_exact(pub_bytes, pub_size, &key.public);
        if (r < 0)
                return log_error_rc(r, "pinned key file: field \"public\" is not a TPM2B_PUBLIC.");
        r = tg_pinned_public_check(&key.public.publicArea);
        if (r < 0)
                return r;
        r = tg_json_get_hex(root, "name", 34, 34, true, &name_bytes, &name_size, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"name\" %s.", problem);
        if (r < 0)
                return r;
        r = tg_public_name(&key.public.publicArea, &computed);
        if (r < 0)
                return r;
        if (!tg_name_equal_bytes(&computed, name_bytes, name_size))
                return log_error_rc(-TG_ERR_INVALID, "pinned key file: \"name\" does not match \"public\" (file corrupted or edited).");
        key.name = computed;

        /* Provenance: optional, informational. */
        r = get_string(root, "ek_template", false, &s);
        if (r < 0)
                return r;
        copy_info(key.ek_template, sizeof key.ek_template, s);
        r = get_string(root, "ek_certificate_sha256", false, &s);
        if (r < 0)
                return r;
        copy_info(key.ek_cert_sha256, sizeof key.ek_cert_sha256, s);
        r = get_string(root, "ek_certificate_issuer", false, &s);
        if (r < 0)
                return r;
        copy_info(key.ek_cert_issuer, sizeof key.ek_cert_issuer, s);
        r = get_string(root, "ek_anchor_vendor", false, &s);
        if (r < 0)
                return r;
        copy_info(key.ek_anchor_vendor, sizeof key.ek_anchor_vendor, s);
        r = get_string(root, "ek_anchor_sha256", false, &s);
        if (r < 0)
                return r;
        copy_info(key.ek_anchor_sha256, sizeof key.ek_anchor_sha256, s);
        r = get_string(root, "provisioned_at", false, &s);
        if (r < 0)
                return r;
        copy_info(key.provisioned_at, sizeof key.provisioned_at, s);
        /* Absent: a file written before TOFU existed, proven by a certificate. */
        r = get_string(root, "ek_trust", false, &s);
        if (r < 0)
                return r;
        if (s && strcmp(s, TG_PINNED_TRUST_TOFU) == 0)
                key.tofu = true;
        else if (s && strcmp(s, TG_PINNED_TRUST_CERT) != 0)
                return log_error_rc(-TG_ERR_INVALID, "pinned key file: field \"ek_trust\" is neither \"%s\" nor \"%s\".",
                                    TG_PINNED_TRUST_CERT, TG_PINNED_TRUST_TOFU);
        r = tg_json_get_int(root, "ek_nv_index", 0, UINT32_MAX, false, &nv_index, &present, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"ek_nv_index\" %s.", problem);
        if (r < 0)
                return r;
        if (present)
                key.ek_nv_index = (uint32_t) nv_index;
        present = false;
        r = tg_json_get_int(root, "persistent_handle", 0, UINT32_MAX, false, &handle, &present, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "pinned key file: field \"persistent_handle\" %s.", problem);
        if (r < 0)
                return r;
        if (present && handle != 0 &&
            (handle < TG_ENDORSEMENT_PERSISTENT_FIRST || handle > TG_ENDORSEMENT_PERSISTENT_LAST))
                return log_error_rc(-TG_ERR_INVALID, "pinned key file: \"persistent_handle\" 0x%08" PRIx64 " is "
                                    "not an endorsement-hierarchy persistent handle.", handle);
        if (present)
                key.persistent_handle = (uint32_t) handle;

        *ret = key;
        return 0;
}

int tg_pinned_key_load(const char *state_dir, tg_pinned_key *ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        size_t size;
        int r;

        if (tg_asprintf(&path, "%s/%s", state_dir, TG_PINNED_FILE_NAME) < 0)
                return -TG_ERR_NOMEM;
        /* Whoever can write this file chooses which TPM is trusted: root only (tg_check_trusted). */
        r = tg_read_trusted_file(path, "pinned EK signing key", TG_PINNED_MAX_SIZE, &data, &size);
        if (r == -TG_ERR_CONFIG)
                return r;
        if (r == -TG_ERR_NOT_FOUND)
                return log_error_rc(-TG_ERR_NOT_PROVISIONED,
                                    "Not provisioned: %s does not exist. Run 'tpmguard provision' first.", path);
        if (r < 0)
                return log_error_rc(r == -TG_ERR_INVALID ? -TG_ERR_NOT_PROVISIONED : r,
                                    "Cannot read the pinned EK signing key %s.", path);
        r = tg_pinned_key_parse((const char *) data, size, ret);
        if (r < 0)
                return log_error_rc(-TG_ERR_NOT_PROVISIONED,
                                    "The pinned EK signing key %s is unusable. Run 'tpmguard provision' again.", path);
        return 0;
}

int tg_pinned_key_format(const tg_pinned_key *key, char **ret) {
        _cleanup_(json_object_putp) json_object *root = json_object_new_object();
        _cleanup_free_ uint8_t *pub = NULL;
        _cleanup_free_ char *pub_hex = NULL, *name_hex = NULL;
        size_t pub_size;
        char *s;
        int r;

        if (!root)
                return -TG_ERR_NOMEM;
        r = tg_tpm2b_public_marshal(&key->public, &pub, &pub_size);
        if (r < 0)
                return r;
        if (tg_hex_encode(pub, pub_size, &pub_hex) < 0 || tg_hex_encode(key->name.name, key->name.size, &name_hex) < 0)
                return -TG_ERR_NOMEM;
        if (json_object_object_add(root, "version", json_object_new_int(1)) < 0 ||
            json_object_object_add(root, "name", json_object_new_string(name_hex)) < 0 ||
            json_object_object_add(root, "public", json_object_new_string(pub_hex)) < 0 ||
            json_object_object_add(root, "ek_nv_index", json_object_new_int64(key->ek_nv_index)) < 0 ||
            json_object_object_add(root, "ek_template", json_object_new_string(key->ek_template)) < 0 ||
            json_object_object_add(root, "ek_certificate_sha256", json_object_new_string(key->ek_cert_sha256)) < 0 ||
            json_object_object_add(root, "ek_certificate_issuer", json_object_new_string(key->ek_cert_issuer)) < 0 ||
            json_object_object_add(root, "ek_anchor_vendor", json_object_new_string(key->ek_anchor_vendor)) < 0 ||
            json_object_object_add(root, "ek_anchor_sha256", json_object_new_string(key->ek_anchor_sha256)) < 0 ||
            json_object_object_add(root, "provisioned_at", json_object_new_string(key->provisioned_at)) < 0 ||
            json_object_object_add(root, "ek_trust", json_object_new_string(tg_pinned_trust(key))) < 0)
                return -TG_ERR_NOMEM;
        if (key->persistent_handle != 0 &&
            json_object_object_add(root, "persistent_handle", json_object_new_int64(key->persistent_handle)) < 0)
                return -TG_ERR_NOMEM;
        s = strdup(tg_json_pretty(root));
        if (!s)
                return -TG_ERR_NOMEM;
        *ret = s;
        return 0;
}

int tg_pinned_key_save(const char *dir, const tg_pinned_key *key) {
        _cleanup_free_ char *text = NULL, *path = NULL, *with_nl = NULL;
        int r;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", dir);
        r = tg_pinned_key_format(key, &text);
        if (r < 0)
                return r;
        if (tg_asprintf(&path, "%s/%s", dir, TG_PINNED_FILE_NAME) < 0 || tg_asprintf(&with_nl, "%s\n", text) < 0)
                return -TG_ERR_NOMEM;
        return tg_write_file_atomic(path, with_nl, strlen(with_nl), 0644);
}
