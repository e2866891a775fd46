/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard: the command line. Thin: parses arguments, reads secrets from
 * files or the terminal (never argv or the environment), calls the core and
 * turns its error space into the exit codes documented in tpmguard(8).
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "pin.h"
#include "pinned.h"
#include "provision.h"
#include "secret.h"
#include "tpmguard-config.h"
#include "util.h"
#include "verify.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);

typedef struct cli {
        const char *config_path;
        const char *tcti;
        const char *null_name;
        bool json;
        bool record;
        const char *ek_cert;
        const char *ek_ca;
        const char *ek_intermediates;
        const char *output_dir;
        const char *endorsement_auth_file;
        char **args;
        int n_args;
} cli;

static void help(void) {
        printf("Usage: tpmguard [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Unlock LUKS2 volumes with a TPM, safely against TPM bus interposers.\n"
               "\n"
               "Commands:\n"
               "  provision   Pin the EK signing key after proving it against the EK certificate\n"
               "  verify      Verify the TPM: kernel null_name, pinned key, certification\n"
               "\n"
               "Options:\n"
               "  -c --config FILE             Configuration file (default %s)\n"
               "     --tcti TCTI               TPM transport, overrides the configuration\n"
               "     --null-name FILE          Read the kernel's null_name from FILE\n"
               "     --json                    Machine-readable output\n"
               "  -v --verbose                 More messages (repeat for debug)\n"
               "  -q --quiet                   Errors only\n"
               "  -h --help                    This help\n"
               "     --version                 Version\n"
               "\n"
               "provision options:\n"
               "     --ek-cert FILE            EK certificate (default: read from TPM NV)\n"
               "     --ek-ca FILE|DIR          Manufacturer CA store (default: ek_ca setting)\n"
               "     --ek-intermediates FILE   Extra untrusted intermediate certificates\n"
               "     --output DIR              Where to pin the key (default: state_dir)\n"
               "     --endorsement-auth-file F Endorsement hierarchy password ('-' = stdin)\n"
               "\n"
               "verify options:\n"
               "     --record                  Also write the result to cache_dir/boot-verify.json\n"
               "     --endorsement-auth-file F Endorsement hierarchy password ('-' = stdin)\n"
               "\n"
               "See tpmguard(8) for exit codes.\n", TPMGUARD_CONFIG_PATH);
}

static int load_config(const cli *c, tg_config **ret) {
        _cleanup_config_ tg_config *config = NULL;
        int r = tg_config_load(c->config_path, &config);

        if (r < 0)
                return r;
        if (c->tcti) {
                free(config->tcti);
                config->tcti = strdup(c->tcti);
                if (!config->tcti)
                        return -TG_ERR_NOMEM;
        }
        *ret = TAKE_PTR(config);
        return 0;
}

static int read_optional_secret(const char *file, const char *prompt, tg_secret **ret) {
        if (!file) {
                *ret = NULL;
                return 0;
        }
        return tg_pin_read(file, prompt, false, ret);
}

static int cmd_provision(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        tg_pinned_key pinned;
        tg_provision_options o = {
                .ek_cert_file = c->ek_cert,
                .ek_ca = c->ek_ca,
                .ek_intermediates = c->ek_intermediates,
                .output_dir = c->output_dir,
        };
        _cleanup_free_ char *name_hex = NULL;
        int r;

        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_provision(config, &o, &pinned);
        if (r < 0)
                return log_error_rc(r, "Provisioning failed: %s.", tg_err_str(r));

        r = tg_hex_encode(pinned.name.name, pinned.name.size, &name_hex);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o_json = json_object_new_object();
                if (!o_json)
                        return -TG_ERR_NOMEM;
                json_object_object_add(o_json, "result", json_object_new_string("provisioned"));
                json_object_object_add(o_json, "ek_signing_key_name", json_object_new_string(name_hex));
                json_object_object_add(o_json, "ek_template", json_object_new_string(pinned.ek_template));
                json_object_object_add(o_json, "ek_nv_index", json_object_new_int64(pinned.ek_nv_index));
                json_object_object_add(o_json, "ek_certificate_sha256", json_object_new_string(pinned.ek_cert_sha256));
                json_object_object_add(o_json, "ek_certificate_issuer", json_object_new_string(pinned.ek_cert_issuer));
                json_object_object_add(o_json, "state_dir",
                                       json_object_new_string(c->output_dir ?: config->state_dir));
                printf("%s\n", json_object_to_json_string_ext(o_json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        } else
                printf("Provisioned. EK signing key %s\n"
                       "  proven against EK certificate %s (%s, issuer %s)\n"
                       "  pinned in %s/%s\n",
                       name_hex, pinned.ek_cert_sha256, pinned.ek_template, pinned.ek_cert_issuer,
                       c->output_dir ?: config->state_dir, TG_PINNED_FILE_NAME);
        return 0;
}

static json_object *verify_report_json(const tg_config *config, const tg_verify_report *rep, int r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *null_hex = NULL, *signer_hex = NULL;

        if (!o)
                return NULL;
        if (rep->null_name.size > 0 && tg_hex_encode(rep->null_name.name, rep->null_name.size, &null_hex) < 0)
                return NULL;
        if (rep->ek_signing_key_name.size > 0 &&
            tg_hex_encode(rep->ek_signing_key_name.name, rep->ek_signing_key_name.size, &signer_hex) < 0)
                return NULL;
        json_object_object_add(o, "verdict", json_object_new_string(r >= 0 ? "verified" : tg_err_id(r)));
        json_object_object_add(o, "null_name", null_hex ? json_object_new_string(null_hex) : NULL);
        json_object_object_add(o, "ek_signing_key_name", signer_hex ? json_object_new_string(signer_hex) : NULL);
        json_object_object_add(o, "kernel_null_name",
                               json_object_new_string(rep->kernel_null_name_present ? "present" : "absent"));
        json_object_object_add(o, "policy", json_object_new_string(tg_null_name_policy_to_string(config->kernel_null_name)));
        if (r >= 0) {
                json_object_object_add(o, "clock", json_object_new_int64((int64_t) rep->clock));
                json_object_object_add(o, "reset_count", json_object_new_int64(rep->reset_count));
                json_object_object_add(o, "restart_count", json_object_new_int64(rep->restart_count));
                json_object_object_add(o, "safe", json_object_new_boolean(rep->safe));
        }
        json_object_object_add(o, "message", json_object_new_string(r >= 0 ? "TPM verified" : tg_err_str(r)));
        return TAKE_PTR(o);
}

static int record_verify_result(const tg_config *config, const char *text) {
        _cleanup_free_ char *path = NULL;

        if (mkdir(config->cache_dir, 0700) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", config->cache_dir);
        if (tg_asprintf(&path, "%s/boot-verify.json", config->cache_dir) < 0)
                return -TG_ERR_NOMEM;
        return tg_write_file_atomic(path, text, strlen(text), 0600);
}

static int cmd_verify(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_(json_object_putp) json_object *json = NULL;
        tg_verify_report report = {};
        tg_verify_options o = { .null_name_path = c->null_name };
        const char *text;
        int r, q;

        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_verify(config, &o, &report, NULL);

        json = verify_report_json(config, &report, r);
        if (!json)
                return -TG_ERR_NOMEM;
        text = json_object_to_json_string_ext(json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (c->record) {
                q = record_verify_result(config, text);
                if (q < 0 && r >= 0)
                        r = q;
        }
        if (c->json)
                printf("%s\n", text);
        else if (r >= 0)
                printf("TPM verified: NULL key %s by the pinned EK signing key%s.\n",
                       report.kernel_null_name_present ? "matches the kernel's null_name and is certified"
                                                       : "is certified",
                       report.kernel_null_name_present ? ""
                                                       : " (kernel exports no null_name: TPM resets during boot are not detectable)");
        if (r < 0)
                log_error("Verification failed: %s.", tg_err_str(r));
        return r;
}

int main(int argc, char *argv[]) {
        enum {
                ARG_TCTI = 0x100, ARG_NULL_NAME, ARG_JSON, ARG_VERSION, ARG_RECORD,
                ARG_EK_CERT, ARG_EK_CA, ARG_EK_INTERMEDIATES, ARG_OUTPUT, ARG_EAUTH,
        };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "tcti", required_argument, NULL, ARG_TCTI },
                { "null-name", required_argument, NULL, ARG_NULL_NAME },
                { "json", no_argument, NULL, ARG_JSON },
                { "verbose", no_argument, NULL, 'v' },
                { "quiet", no_argument, NULL, 'q' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "record", no_argument, NULL, ARG_RECORD },
                { "ek-cert", required_argument, NULL, ARG_EK_CERT },
                { "ek-ca", required_argument, NULL, ARG_EK_CA },
                { "ek-intermediates", required_argument, NULL, ARG_EK_INTERMEDIATES },
                { "output", required_argument, NULL, ARG_OUTPUT },
                { "endorsement-auth-file", required_argument, NULL, ARG_EAUTH },
                {}
        };
        static const struct {
                const char *name;
                int (*run)(const cli *c);
        } commands[] = {
                { "provision", cmd_provision },
                { "verify", cmd_verify },
        };
        cli c = {};
        int opt, r;

        tg_process_harden();

        while ((opt = getopt_long(argc, argv, "c:vqh", options, NULL)) >= 0)
                switch (opt) {
                case 'c': c.config_path = optarg; break;
                case ARG_TCTI: c.tcti = optarg; break;
                case ARG_NULL_NAME: c.null_name = optarg; break;
                case ARG_JSON: c.json = true; break;
                case 'v': tg_log_set_max_level(tg_log_get_max_level() >= LOG_INFO ? LOG_DEBUG : LOG_INFO); break;
                case 'q': tg_log_set_max_level(LOG_ERR); break;
                case 'h': help(); return 0;
                case ARG_VERSION: printf("tpmguard %s\n", TPMGUARD_VERSION); return 0;
                case ARG_RECORD: c.record = true; break;
                case ARG_EK_CERT: c.ek_cert = optarg; break;
                case ARG_EK_CA: c.ek_ca = optarg; break;
                case ARG_EK_INTERMEDIATES: c.ek_intermediates = optarg; break;
                case ARG_OUTPUT: c.output_dir = optarg; break;
                case ARG_EAUTH: c.endorsement_auth_file = optarg; break;
                default: return tg_err_exit_code(-TG_ERR_INVALID);
                }

        if (optind >= argc) {
                help();
                return tg_err_exit_code(-TG_ERR_INVALID);
        }
        c.args = argv + optind + 1;
        c.n_args = argc - optind - 1;

        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(argv[optind], commands[i].name) == 0) {
                        r = commands[i].run(&c);
                        return tg_err_exit_code(r);
                }
        log_error("Unknown command \"%s\". See 'tpmguard --help'.", argv[optind]);
        return tg_err_exit_code(-TG_ERR_INVALID);
}
