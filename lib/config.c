/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <tss2/tss2_tpm2_types.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "tpmguard-config.h"
#include "util.h"

#define TG_DEFAULT_TCTI "device:/dev/tpmrm0"
#define TG_MAX_CONFIG_SIZE (64 * 1024)

void tg_config_free(tg_config *c) {
        if (!c)
                return;
        free(c->path);
        free(c->tcti);
        free(c->state_dir);
        free(c->null_name_path);
        free(c->ek_ca);
        free(c->cache_dir);
        free(c);
}

const char *tg_null_name_policy_to_string(tg_null_name_policy p) {
        return p == TG_NULL_NAME_REQUIRED ? "required" : p == TG_NULL_NAME_PREFER ? "prefer" : "if-available";
}

const char *tg_resource_manager_to_string(tg_resource_manager m) {
        return m == TG_RESOURCE_MANAGER_YES ? "yes" : m == TG_RESOURCE_MANAGER_NO ? "no" : "auto";
}

bool tg_tcti_is_resource_manager(const char *tcti) {
        const char *p;

        if (!tcti)
                return false;
        if (strncmp(tcti, "device:/dev/tpmrm", 17) == 0) {
                p = tcti + 17;
                if (!isdigit((unsigned char) *p))
                        return false;
                while (isdigit((unsigned char) *p))
                        p++;
                return *p == '\0';
        }
        if (strncmp(tcti, "tabrmd", 6) == 0)
                return tcti[6] == '\0' || tcti[6] == ':';
        return strncmp(tcti, "libtss2-tcti-tabrmd.so", 22) == 0;
}

bool tg_config_resource_manager(const tg_config *c) {
        switch (c->resource_manager) {
        case TG_RESOURCE_MANAGER_YES:
                return true;
        case TG_RESOURCE_MANAGER_NO:
                return false;
        default:
                return tg_tcti_is_resource_manager(c->tcti);
        }
}

static const struct {
        const char *name;
        uint16_t alg;
} pcr_banks[] = {
        { "sha1", TPM2_ALG_SHA1 },
        { "sha256", TPM2_ALG_SHA256 },
        { "sha384", TPM2_ALG_SHA384 },
        { "sha512", TPM2_ALG_SHA512 },
};

int tg_pcr_bank_from_string(const char *s, uint16_t *ret) {
        for (size_t i = 0; i < ELEMENTSOF(pcr_banks); i++)
                if (strcmp(s, pcr_banks[i].name) == 0) {
                        *ret = pcr_banks[i].alg;
                        return 0;
                }
        return -TG_ERR_INVALID;
}

const char *tg_pcr_bank_to_string(uint16_t alg) {
        for (size_t i = 0; i < ELEMENTSOF(pcr_banks); i++)
                if (pcr_banks[i].alg == alg)
                        return pcr_banks[i].name;
        return NULL;
}

int tg_pcr_list_parse(const char *s, uint32_t *ret_mask) {
        uint32_t mask = 0;
        const char *p = s;

        if (*p == '\0') {
                *ret_mask = 0;
                return 0;
        }
        for (;;) {
                char *end;
                unsigned long n;

                if (!isdigit((unsigned char) *p))
                        return -TG_ERR_INVALID;
                errno = 0;
                n = strtoul(p, &end, 10);
                if (errno != 0 || n > 23 || end == p)
                        return -TG_ERR_INVALID;
                mask |= UINT32_C(1) << n;
                p = end;
                if (*p == '\0')
                        break;
                if (*p != ',' && *p != '+')
                        return -TG_ERR_INVALID;
                p++;
        }
        *ret_mask = mask;
        return 0;
}

void tg_pcr_list_format(uint32_t mask, char *buf, size_t size) {
        size_t off = 0;

        if (size == 0)
                return;
        buf[0] = '\0';
        for (unsigned i = 0; i < 24 && off < size; i++)
                if (mask & (UINT32_C(1) << i)) {
                        int n = snprintf(buf + off, size - off, "%s%u", off ? "," : "", i);
                        if (n < 0)
                                return;
                        off += (size_t) n;
                }
}

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = '\0';
        return s;
}

static int set_string(char **field, const char *value) {
        char *copy = strdup(value);
        if (!copy)
                return -TG_ERR_NOMEM;
        free(*field);
        *field = copy;
        return 0;
}

static int config_defaults(tg_config **ret) {
        _cleanup_config_ tg_config *c = calloc(1, sizeof *c);

        if (!c)
                return -TG_ERR_NOMEM;
        c->tcti = strdup(TG_DEFAULT_TCTI);
        c->state_dir = strdup(TPMGUARD_STATE_DIR);
        /* The TPM manufacturers' CAs tpmguard ships, then the administrator's additions and distrust list. */
        c->ek_ca = strdup(TPMGUARD_EK_CA_DIR " " TPMGUARD_EK_CA_LOCAL_DIR);
        c->cache_dir = strdup(TG_DEFAULT_CACHE_DIR);
        if (!c->tcti || !c->state_dir || !c->cache_dir || !c->ek_ca)
                return -TG_ERR_NOMEM;
        c->kernel_null_name = TG_NULL_NAME_PREFER;
        c->resource_manager = TG_RESOURCE_MANAGER_AUTO;
        c->pcr_bank = TPM2_ALG_SHA256;
        c->pcr_mask = UINT32_C(1) << 7;
        c->da_max_tries = TG_DA_MAX_TRIES;
        c->da_recovery_time = TG_DA_RECOVERY_TIME;
        c->da_lockout_recovery = TG_DA_LOCKOUT_RECOVERY;
        c->pin_tries = TG_DEFAULT_PIN_TRIES;
        c->pin_da_reserve = TG_DEFAULT_PIN_DA_RESERVE;
        c->allow_no_pin = false;
        c->pin_min_length = TG_PIN_MIN_LENGTH_DEFAULT;
        c->pin_kdf_memory = TG_PIN_KDF_MEMORY_DEFAULT;
        c->pin_kdf_time_ms = TG_PIN_KDF_TIME_MS_DEFAULT;
        *ret = TAKE_PTR(c);
        return 0;
}

static int parse_u32(const char *origin, unsigned line, const char *key, const char *value, uint32_t *ret) {
        unsigned long long n;
        char *end;

        errno = 0;
        n = strtoull(value, &end, 10);
        if (!isdigit((unsigned char) *value) || *end != '\0' || errno != 0 || n > UINT32_MAX)
                return log_error_rc(-TG_ERR_CONFIG, "%s:%u: %s must be a number 0..4294967295, not \"%s\".",
                                    origin, line, key, value);
        *ret = (uint32_t) n;
        return 0;
}

static int parse_uint(const char *origin, unsigned line, const char *key, const char *value,
                      unsigned min, unsigned max, unsigned *ret) {
        unsigned long n;
        char *end;

        errno = 0;
        n = strtoul(value, &end, 10);
        if (!isdigit((unsigned char) value[0]) || *end != '\0' || errno != 0 || n < min || n > max)
                return log_error_rc(-TG_ERR_CONFIG, "%s:%u: %s must be a whole number from %u to %u, not \"%s\".",
                                    origin, line, key, min, max, value);
        *ret = (unsigned) n;
        return 0;
}

static int config_set(tg_config *c, const char *origin, unsigned line, const char *key, const char *value) {
        if (strcmp(key, "pin_tries") == 0)
                return parse_uint(origin, line, key, value, 1, TG_PIN_TRIES_MAX, &c->pin_tries);
        if (strcmp(key, "pin_da_reserve") == 0)
                return parse_uint(origin, line, key, value, 0, TG_PIN_DA_RESERVE_MAX, &c->pin_da_reserve);
        if (strcmp(key, "pin_kdf_memory") == 0)
                return parse_uint(origin, line, key, value, TG_PIN_KDF_MEMORY_MIN, TG_PIN_KDF_MEMORY_MAX,
                                  &c->pin_kdf_memory);
        if (strcmp(key, "pin_kdf_time_ms") == 0)
                return parse_uint(origin, line, key, value, TG_PIN_KDF_TIME_MS_MIN, TG_PIN_KDF_TIME_MS_MAX,
                                  &c->pin_kdf_time_ms);
        if (strcmp(key, "tcti") == 0)
                return set_string(&c->tcti, value);
        if (strcmp(key, "state_dir") == 0)
                return set_string(&c->state_dir, value);
        if (strcmp(key, "null_name_path") == 0)
                return set_string(&c->null_name_path, value);
        if (strcmp(key, "ek_ca") == 0)
                return set_string(&c->ek_ca, value);
        if (strcmp(key, "cache_dir") == 0)
                return set_string(&c->cache_dir, value);
        if (strcmp(key, "kernel_null_name") == 0) {
                if (strcmp(value, "required") == 0)
                        c->kernel_null_name = TG_NULL_NAME_REQUIRED;
                else if (strcmp(value, "prefer") == 0)
                        c->kernel_null_name = TG_NULL_NAME_PREFER;
                else if (strcmp(value, "if-available") == 0)
                        c->kernel_null_name = TG_NULL_NAME_IF_AVAILABLE;
                else
                        return log_error_rc(-TG_ERR_CONFIG,
                                            "%s:%u: kernel_null_name must be \"prefer\", \"required\" or "
                                            "\"if-available\", not \"%s\".", origin, line, value);
                return 0;
        }
        if (strcmp(key, "resource_manager") == 0) {
                if (strcmp(value, "auto") == 0)
                        c->resource_manager = TG_RESOURCE_MANAGER_AUTO;
                else if (strcmp(value, "yes") == 0)
                        c->resource_manager = TG_RESOURCE_MANAGER_YES;
                else if (strcmp(value, "no") == 0)
                        c->resource_manager = TG_RESOURCE_MANAGER_NO;
                else
                        return log_error_rc(-TG_ERR_CONFIG,
                                            "%s:%u: resource_manager must be \"auto\", \"yes\" or \"no\", not \"%s\".",
                                            origin, line, value);
                return 0;
        }
        if (strcmp(key, "pcr_bank") == 0) {
                if (tg_pcr_bank_from_string(value, &c->pcr_bank) < 0)
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: unknown pcr_bank \"%s\" (sha1, sha256, sha384, sha512).",
                                            origin, line, value);
                return 0;
        }
        if (strcmp(key, "pcrs") == 0) {
                if (tg_pcr_list_parse(value, &c->pcr_mask) < 0)
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: pcrs must be a list like \"7\" or \"7,11\" (0..23), not \"%s\".",
                                            origin, line, value);
                return 0;
        }
        if (strcmp(key, "da_max_tries") == 0)
                return parse_u32(origin, line, key, value, &c->da_max_tries);
        if (strcmp(key, "da_recovery_time") == 0)
                return parse_u32(origin, line, key, value, &c->da_recovery_time);
        if (strcmp(key, "da_lockout_recovery") == 0)
                return parse_u32(origin, line, key, value, &c->da_lockout_recovery);
        if (strcmp(key, "allow_no_pin") == 0 || strcmp(key, "allow_unextended_pcrs") == 0) {
                bool *b = strcmp(key, "allow_no_pin") == 0 ? &c->allow_no_pin : &c->allow_unextended_pcrs;
                if (strcmp(value, "yes") == 0)
                        *b = true;
                else if (strcmp(value, "no") == 0)
                        *b = false;
                else
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: %s must be \"yes\" or \"no\", not \"%s\".",
                                            origin, line, key, value);
                return 0;
        }
        if (strcmp(key, "pin_min_length") == 0) {
                char *end;
                unsigned long n;

                errno = 0;
                n = strtoul(value, &end, 10);
                if (!isdigit((unsigned char) value[0]) || *end || errno != 0 || n < TG_PIN_MIN_LENGTH_MIN ||
                    n > TG_PIN_MIN_LENGTH_MAX)
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: pin_min_length must be a number from %d to %d, not \"%s\".",
                                            origin, line, TG_PIN_MIN_LENGTH_MIN, TG_PIN_MIN_LENGTH_MAX, value);
                c->pin_min_length = (unsigned) n;
                return 0;
        }
        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: unknown setting \"%s\".", origin, line, key);
}

/* The settings seen so far, for the duplicate check (keys are short; the set is small). */
#define CONFIG_KEYS_MAX 32
int tg_config_get(const tg_config *c, const char *key, char **ret) {
        const char *s = NULL;
        char buf[96], *copy;

        assert(c);
        assert(key);

        if (strcmp(key, "tcti") == 0)
                s = c->tcti;
        else if (strcmp(key, "state_dir") == 0)
                s = c->state_dir;
        else if (strcmp(key, "null_name_path") == 0)
                s = c->null_name_path ?: "";
        else if (strcmp(key, "ek_ca") == 0)
                s = c->ek_ca ?: "";
        else if (strcmp(key, "cache_dir") == 0)
                s = c->cache_dir;
        else if (strcmp(key, "kernel_null_name") == 0)
                s = tg_null_name_policy_to_string(c->kernel_null_name);
        else if (strcmp(key, "resource_manager") == 0)
                s = tg_resource_manager_to_string(c->resource_manager);
        else if (strcmp(key, "pcr_bank") == 0)
                s = tg_pcr_bank_to_string(c->pcr_bank);
        else if (strcmp(key, "pcrs") == 0) {
                tg_pcr_list_format(c->pcr_mask, buf, sizeof buf);
                s = buf;
        } else if (strcmp(key, "da_max_tries") == 0) {
                snprintf(buf, sizeof buf, "%" PRIu32, c->da_max_tries);
                s = buf;
        } else if (strcmp(key, "da_recovery_time") == 0) {
                snprintf(buf, sizeof buf, "%" PRIu32, c->da_recovery_time);
                s = buf;
        } else if (strcmp(key, "da_lockout_recovery") == 0) {
                snprintf(buf, sizeof buf, "%" PRIu32, c->da_lockout_recovery);
                s = buf;
        } else if (strcmp(key, "pin_tries") == 0) {
                snprintf(buf, sizeof buf, "%u", c->pin_tries);
                s = buf;
        } else if (strcmp(key, "pin_da_reserve") == 0) {
                snprintf(buf, sizeof buf, "%u", c->pin_da_reserve);
                s = buf;
        } else if (strcmp(key, "pin_kdf_memory") == 0) {
                snprintf(buf, sizeof buf, "%u", c->pin_kdf_memory);
                s = buf;
        } else if (strcmp(key, "pin_kdf_time_ms") == 0) {
                snprintf(buf, sizeof buf, "%u", c->pin_kdf_time_ms);
                s = buf;
        } else if (strcmp(key, "allow_no_pin") == 0)
                s = c->allow_no_pin ? "yes" : "no";
        else if (strcmp(key, "allow_unextended_pcrs") == 0)
                s = c->allow_unextended_pcrs ? "yes" : "no";
        else if (strcmp(key, "pin_min_length") == 0) {
                snprintf(buf, sizeof buf, "%u", c->pin_min_length);
                s = buf;
        } else
                return log_error_rc(-TG_ERR_INVALID, "Unknown setting \"%s\" (see tpmguard.conf(5)).", key);
        copy = strdup(s);
        if (!copy)
                return -TG_ERR_NOMEM;
        *ret = copy;
        return 0;
}

int tg_config_parse(const char *text, const char *origin, tg_config **ret) {
        _cleanup_config_ tg_config *c = NULL;
        _cleanup_free_ char *copy = strdup(text);
        char *saveptr = NULL, *l;
        const char *seen[CONFIG_KEYS_MAX];
        unsigned seen_line[CONFIG_KEYS_MAX];
        size_t n_seen = 0;
        unsigned line = 0;
        int r;

        if (!copy)
                return -TG_ERR_NOMEM;
        r = config_defaults(&c);
        if (r < 0)
                return r;
        r = set_string(&c->path, origin);
        if (r < 0)
                return r;

        /* strtok_r would skip empty lines and so miscount; walk by hand. */
        for (l = copy; l; ) {
                char *next = strchr(l, '\n'), *eq, *key, *value;

                if (next)
                        *next++ = '\0';
                line++;
                saveptr = strchr(l, '#');
                if (saveptr)
                        *saveptr = '\0';
                l = strip(l);
                if (*l == '\0') {
                        l = next;
                        continue;
                }
                eq = strchr(l, '=');
                if (!eq)
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: expected \"key = value\".", origin, line);
                *eq = '\0';
                key = strip(l);
                value = strip(eq + 1);
                if (*key == '\0' || *value == '\0')
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: empty key or value.", origin, line);
                r = config_set(c, origin, line, key, value);
                if (r < 0)
                        return r;
                /*
                 * A key given twice is an error, not "the last one wins": a
                 * second line further down must not silently undo the one
                 * an administrator reads (kernel_null_name = required).
                 */
                for (size_t i = 0; i < n_seen; i++)
                        if (strcmp(seen[i], key) == 0)
                                return log_error_rc(-TG_ERR_CONFIG, "%s:%u: \"%s\" is already set on line %u; "
                                                    "each setting may appear once.", origin, line, key, seen_line[i]);
                if (n_seen >= CONFIG_KEYS_MAX)
                        return log_error_rc(-TG_ERR_CONFIG, "%s:%u: too many settings.", origin, line);
                seen[n_seen] = key; /* points into copy, which outlives the loop */
                seen_line[n_seen++] = line;
                l = next;
        }

        *ret = TAKE_PTR(c);
        return 0;
}

int tg_config_load(const char *path, tg_config **ret) {
        _cleanup_free_ uint8_t *text = NULL;
        bool explicit = true;
        size_t n = 0;
        int r;

        if (!path)
                path = secure_getenv("TPMGUARD_CONFIG");
        if (!path || *path == '\0') {
                path = TPMGUARD_CONFIG_PATH;
                explicit = false;
        }

        r = tg_read_trusted_file(path, "configuration", TG_MAX_CONFIG_SIZE, &text, &n);
        if (r == -TG_ERR_NOT_FOUND) {
                /* A file named by -c or $TPMGUARD_CONFIG is meant to be used: never fall back to defaults. */
                if (explicit)
                        return log_error_rc(-TG_ERR_CONFIG, "The configuration file %s does not exist "
                                            "(named by -c/--config or $TPMGUARD_CONFIG).", path);
                log_debug("%s does not exist, using defaults.", path);
                return tg_config_parse("", path, ret);
        }
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_CONFIG, "%s is not a regular file or is larger than %d bytes.",
                                    path, TG_MAX_CONFIG_SIZE);
        if (r == -TG_ERR_IO)
                return log_error_rc(-TG_ERR_CONFIG, "Cannot read %s: %s.", path,
                                    errno == EACCES ? "permission denied (run as root)" : strerror(errno));
        if (r < 0)
                return r;
        if (memchr(text, '\0', n))
                return log_error_rc(-TG_ERR_CONFIG, "%s contains a NUL byte.", path);
        return tg_config_parse((const char *) text, path, ret);
}
