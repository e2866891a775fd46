/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"
#include "pcr-predict.h"

/* tpmguard pcrs [--predict]: the event log replayed against the verified PCRs; PCR 7 of the next boot. */
int cmd_pcrs(const cli *c, tg_config *config);

/* The update files --db/--dbx/--kek/--authority name, read (kept in files), as prediction options. */
typedef struct cmd_pcrs_files {
        uint8_t *data[4];   /* KEK, db, dbx, authority */
} cmd_pcrs_files;
void cmd_pcrs_files_free(cmd_pcrs_files *f);
int cmd_pcrs_predict_options(const cli *c, cmd_pcrs_files *files, tg_pcr7_predict_options *ret);
