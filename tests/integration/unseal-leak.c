/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A leaking TPM, for tests/integration/test-secret-hygiene.sh's leaking_tpm
 * case: LD_PRELOADed into the real cryptsetup, it wraps ESAPI's Esys_Unseal
 * and writes what the TPM released (outData, after ESAPI decrypted the
 * session's parameter encryption) to $TPMGUARD_LEAK_FILE: exactly what a
 * TPM firmware flaw, a fault attack or a decapped chip gives an attacker who
 * does not know the PIN, since the TPM holds it. Test code only; nothing in
 * tpmguard loads it.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <tss2/tss2_esys.h>

typedef TSS2_RC (*unseal_fn)(ESYS_CONTEXT *, ESYS_TR, ESYS_TR, ESYS_TR, ESYS_TR, TPM2B_SENSITIVE_DATA **);

TSS2_RC Esys_Unseal(ESYS_CONTEXT *esys, ESYS_TR item, ESYS_TR s1, ESYS_TR s2, ESYS_TR s3, TPM2B_SENSITIVE_DATA **out);

TSS2_RC Esys_Unseal(ESYS_CONTEXT *esys, ESYS_TR item, ESYS_TR s1, ESYS_TR s2, ESYS_TR s3, TPM2B_SENSITIVE_DATA **out) {
        /* libtss2-esys is loaded by the plugin (dlopen'ed RTLD_LOCAL), outside RTLD_NEXT's reach. */
        void *esys_lib = dlopen("libtss2-esys.so.0", RTLD_LAZY | RTLD_NOLOAD);
        unseal_fn real = esys_lib ? (unseal_fn) dlsym(esys_lib, "Esys_Unseal") : NULL;
        const char *path = getenv("TPMGUARD_LEAK_FILE");
        TSS2_RC rc;
        int fd;

        if (!real)
                abort();
        rc = real(esys, item, s1, s2, s3, out);
        dlclose(esys_lib);
        if (rc != TSS2_RC_SUCCESS || !out || !*out || !path)
                return rc;
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, (*out)->buffer, (*out)->size) != (ssize_t) (*out)->size)
                abort();
        close(fd);
        return rc;
}
