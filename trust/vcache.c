/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>
#include <tss2/tss2_rc.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "tpm.h"
#include "util.h"
#include "vcache.h"

#define VCACHE_FILE "null-key.json"
#define VCACHE_MAX_SIZE (16 * 1024)

/* The cache directory must be ours and private, else it is neither read nor written. */
static int vcache_dir_ok(const char *dir, bool create) {
        int r;

        if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
                return log_debug_rc(-TG_ERR_IO, "Cannot create %s: %m", dir);
        r = tg_private_dir_check(dir);
        if (r == -TG_ERR_NOT_FOUND)
                return log_debug_rc(r, "No cache directory %s.", dir);
        if (r < 0)
                return log_debug_rc(r, "%s is not a private directory of ours; not using the cache.", dir);
        return 0;
}

static int vcache_path(const tg_config *config, char **ret) {
        return tg_asprintf(ret, "%s/%s", config->cache_dir, VCACHE_FILE);
}

static int boot_id_string(char ret[SD_ID128_STRING_MAX]) {
        sd_id128_t id;
        int r = sd_id128_get_boot(&id);

        if (r < 0)
                return log_debug_rc(-TG_ERR_IO, "No boot ID: %s", strerror(-r));
        sd_id128_to_string(id, ret);
        return 0;
}

static int add_hex(json_object *o, const char *key, const uint8_t *data, size_t size) {
        _cleanup_free_ char *hex = NULL;

        if (tg_hex_encode(data, size, &hex) < 0)
                return -TG_ERR_NOMEM;
        return json_object_object_add(o, key, json_object_new_string(hex)) < 0 ? -TG_ERR_NOMEM : 0;
}

/* A new record of this boot's cache, {"version": 1, "boot_id": ...}, once cache_dir is fit to write. */
static int record_new(const tg_config *config, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        char boot_id[SD_ID128_STRING_MAX];
        int r;

        if (!o)
                return -TG_ERR_NOMEM;
        r = vcache_dir_ok(config->cache_dir, true);
        if (r < 0)
                return r;
        r = boot_id_string(boot_id);
        if (r < 0)
                return r;
        if (json_object_object_add(o, "version", json_object_new_int(1)) < 0 ||
            json_object_object_add(o, "boot_id", json_object_new_string(boot_id)) < 0)
                return -TG_ERR_NOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* A record of this boot's cache at PATH (WHAT names it in debug logs), strictly parsed: version 1 and
 * this boot's boot_id, or it is not used (a /run that survived a reboot holds another boot's). */
static int record_read(const tg_config *config, const char *path, const char *what, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *v;
        int r;

        r = vcache_dir_ok(config->cache_dir, false);
        if (r < 0)
                return r;
        r = tg_json_read_object(path, VCACHE_MAX_SIZE, &o, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_debug_rc(r, "cache: %s %s.", path, problem);
        if (r < 0)
                return log_debug_rc(r, "No usable %s in %s.", what, path);
        if (!json_object_object_get_ex(o, "version", &v) || json_object_get_int(v) != 1)
                return log_debug_rc(-TG_ERR_INVALID, "cache: %s of an unknown version.", what);
        if (!json_object_object_get_ex(o, "boot_id", &v) || !json_object_is_type(v, json_type_string) ||
            boot_id_string(boot_id) < 0 || strcmp(json_object_get_string(v), boot_id) != 0)
                return log_debug_rc(-TG_ERR_INVALID, "cache: %s of another boot.", what);
        *ret = TAKE_PTR(o);
        return 0;
}

int tg_vcache_store(const tg_config *config, ESYS_CONTEXT *esys, ESYS_TR null_key,
                    const TPM2B_NAME *null_name, const TPM2B_NAME *signer_name, ESYS_TR srk) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ TPMS_CONTEXT *context = NULL;
        _cleanup_free_ uint8_t *ctx_bytes = NULL;
        const size_t ctx_max = sizeof(TPMS_CONTEXT);
        _cleanup_free_ char *path = NULL;
        const char *text;
        size_t off = 0;
        TSS2_RC rc;
        int r;

        r = record_new(config, &o);
        if (r < 0)
                return r;

        rc = Esys_ContextSave(esys, null_key, &context);
        if (rc != TSS2_RC_SUCCESS)
                return log_debug_rc(-TG_ERR_TPM, "ContextSave of the NULL key failed: %s", Tss2_RC_Decode(rc));
        ctx_bytes = malloc(ctx_max);
        if (!ctx_bytes)
                return -TG_ERR_NOMEM;
        rc = Tss2_MU_TPMS_CONTEXT_Marshal(context, ctx_bytes, ctx_max, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_debug_rc(-TG_ERR_TPM, "Cannot marshal the NULL key context: %s", Tss2_RC_Decode(rc));

        if (add_hex(o, "null_name", null_name->name, null_name->size) < 0 ||
            add_hex(o, "ek_signing_key_name", signer_name->name, signer_name->size) < 0 ||
            add_hex(o, "context", ctx_bytes, off) < 0)
                return -TG_ERR_NOMEM;
        if (srk != ESYS_TR_NONE) {
                uint8_t *srk_bytes = NULL;
                size_t srk_size = 0;

                rc = Esys_TR_Serialize(esys, srk, &srk_bytes, &srk_size);
                if (rc != TSS2_RC_SUCCESS)
                        return log_debug_rc(-TG_ERR_TPM, "Cannot serialize the SRK's ESYS_TR: %s", Tss2_RC_Decode(rc));
                r = add_hex(o, "srk", srk_bytes, srk_size);
                free(srk_bytes);
                if (r < 0)
                        return r;
        }

        r = vcache_path(config, &path);
        if (r < 0)
                return r;
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        r = tg_write_file_atomic(path, text, strlen(text), 0600);
        if (r < 0)
                return r;
        log_debug("Cached the verified NULL key for this boot in %s.", path);
        return 0;
}

static int get_hex(json_object *o, const char *key, size_t max, uint8_t **ret, size_t *ret_size) {
        char problem[TG_JSON_PROBLEM_MAX];
        int r;

        r = tg_json_get_hex(o, key, 1, max, true, ret, ret_size, problem, sizeof problem);
        return r == -TG_ERR_INVALID ? log_debug_rc(r, "cache: field \"%s\" %s.", key, problem) : r;
}

int tg_vcache_load(const tg_config *config, ESYS_CONTEXT *esys, const TPM2B_NAME *kernel_null_name,
                   const TPM2B_NAME *signer_name, ESYS_TR *ret_null_key, TPM2B_NAME *ret_name, ESYS_TR *ret_srk) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ uint8_t *name = NULL, *signer = NULL, *ctx_bytes = NULL, *srk_bytes = NULL;
        _cleanup_json_ json_object *o = NULL;
        _cleanup_handle_ tg_handle loaded = { .esys = esys, .tr = ESYS_TR_NONE };
        _cleanup_handle_ tg_handle srk = { .esys = esys, .tr = ESYS_TR_NONE, .close_only = true };
        TPM2_HANDLE srk_handle = 0;
        size_t srk_size = 0;
        _cleanup_free_ TPM2B_NAME *esys_name = NULL;
        size_t name_size, signer_size, ctx_size, off = 0;
        TPMS_CONTEXT context = {};
        TPM2B_NAME result = {};
        TSS2_RC rc;
        int r;

        r = vcache_path(config, &path);
        if (r < 0)
                return r;
        r = record_read(config, path, "verification cache", &o);
        if (r < 0)
                return r;
        r = get_hex(o, "null_name", sizeof(TPMU_NAME), &name, &name_size);
        if (r < 0)
                return r;
        r = get_hex(o, "ek_signing_key_name", sizeof(TPMU_NAME), &signer, &signer_size);
        if (r < 0)
                return r;
        r = get_hex(o, "context", sizeof(TPMS_CONTEXT), &ctx_bytes, &ctx_size);
        if (r < 0)
                return r;

        /* The cache must name exactly what we trust now. */
        if (!tg_name_equal_bytes(signer_name, signer, signer_size))
                return log_debug_rc(-TG_ERR_INVALID, "cache: made under another pinned signer.");
        if (name_size != 34 || name[0] != 0x00 || name[1] != 0x0b)
                return log_debug_rc(-TG_ERR_INVALID, "cache: malformed name.");
        if (kernel_null_name && !tg_name_equal_bytes(kernel_null_name, name, name_size))
                return log_debug_rc(-TG_ERR_INVALID, "cache: not the kernel's NULL key.");

        rc = Tss2_MU_TPMS_CONTEXT_Unmarshal(ctx_bytes, ctx_size, &off, &context);
        if (rc != TSS2_RC_SUCCESS || off != ctx_size)
                return log_debug_rc(-TG_ERR_INVALID, "cache: malformed context.");
        if (context.hierarchy != TPM2_RH_NULL)
                return log_debug_rc(-TG_ERR_INVALID, "cache: context is not in the NULL hierarchy.");

        /* Optional: the SRK's ESYS_TR metadata. Restoring it sends nothing to the TPM. */
        if (json_object_object_get_ex(o, "srk", NULL)) {
                r = get_hex(o, "srk", VCACHE_MAX_SIZE / 2, &srk_bytes, &srk_size);
                if (r < 0)
                        return r;
                rc = Esys_TR_Deserialize(esys, srk_bytes, srk_size, &srk.tr);
                if (rc != TSS2_RC_SUCCESS)
                        return log_debug_rc(-TG_ERR_INVALID, "cache: malformed SRK (%s).", Tss2_RC_Decode(rc));
                if (Esys_TR_GetTpmHandle(esys, srk.tr, &srk_handle) != TSS2_RC_SUCCESS || srk_handle != TG_SRK_HANDLE)
                        return log_debug_rc(-TG_ERR_INVALID, "cache: the SRK entry is not for 0x%08x.", TG_SRK_HANDLE);
        }

        /* The TPM refuses the context after a reset (new NULL proof) or when it was tampered with. */
        rc = Esys_ContextLoad(esys, &context, &loaded.tr);
        if (rc != TSS2_RC_SUCCESS)
                return log_debug_rc(-TG_ERR_TPM, "cache: the TPM refuses the saved context (%s).", Tss2_RC_Decode(rc));

        /* ESAPI restored the key's public area from the context; it must hash to the cached name. */
        rc = Esys_TR_GetName(esys, loaded.tr, &esys_name);
        if (rc != TSS2_RC_SUCCESS || !tg_name_equal_bytes(esys_name, name, name_size))
                return log_debug_rc(-TG_ERR_INVALID, "cache: the context's public area does not have the cached name.");

        memcpy(result.name, name, name_size);
        result.size = (UINT16) name_size;
        *ret_null_key = loaded.tr;
        loaded.tr = ESYS_TR_NONE;
        *ret_name = result;
        *ret_srk = srk.tr;
        srk.tr = ESYS_TR_NONE;
        return 0;
}

void tg_vcache_drop(const tg_config *config) {
        _cleanup_free_ char *path = NULL;

        if (vcache_path(config, &path) >= 0)
                (void) unlink(path);
}

#define VCACHE_DA_FILE "da-state.json"

static const char *const da_fields[] = {
        "failures", "max_failures", "recovery_seconds", "lockout_recovery_seconds",
};

int tg_vcache_da_store(const tg_config *config, const tg_da_state *da) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *path = NULL;
        const uint32_t values[] = { da->failures, da->max_failures, da->recovery_seconds, da->lockout_recovery_seconds };
        const char *text;
        int r;

        r = record_new(config, &o);
        if (r < 0)
                return r;
        if (json_object_object_add(o, "in_lockout", json_object_new_boolean(da->in_lockout)) < 0)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < ELEMENTSOF(values); i++)
                if (json_object_object_add(o, da_fields[i], json_object_new_int64(values[i])) < 0)
                        return -TG_ERR_NOMEM;
        r = tg_asprintf(&path, "%s/%s", config->cache_dir, VCACHE_DA_FILE);
        if (r < 0)
                return r;
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        return tg_write_file_atomic(path, text, strlen(text), 0600);
}

int tg_vcache_da_load(const tg_config *config, tg_da_state *ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *path = NULL;
        uint32_t values[ELEMENTSOF(da_fields)];
        tg_da_state st = {};
        json_object *v;
        int r;

        r = tg_asprintf(&path, "%s/%s", config->cache_dir, VCACHE_DA_FILE);
        if (r < 0)
                return r;
        r = record_read(config, path, "DA state", &o);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "in_lockout", &v) || !json_object_is_type(v, json_type_boolean))
                return log_debug_rc(-TG_ERR_INVALID, "cache: malformed DA state.");
        st.in_lockout = json_object_get_boolean(v);
        for (size_t i = 0; i < ELEMENTSOF(da_fields); i++) {
                int64_t n;

                if (!json_object_object_get_ex(o, da_fields[i], &v) || !json_object_is_type(v, json_type_int) ||
                    (n = json_object_get_int64(v)) < 0 || n > UINT32_MAX)
                        return log_debug_rc(-TG_ERR_INVALID, "cache: malformed DA state.");
                values[i] = (uint32_t) n;
        }
        st.failures = values[0];
        st.max_failures = values[1];
        st.recovery_seconds = values[2];
        st.lockout_recovery_seconds = values[3];
        *ret = st;
        return 0;
}

void tg_vcache_da_drop(const tg_config *config) {
        _cleanup_free_ char *path = NULL;

        if (tg_asprintf(&path, "%s/%s", config->cache_dir, VCACHE_DA_FILE) >= 0)
                (void) unlink(path);
}
