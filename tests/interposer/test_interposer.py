# SPDX-License-Identifier: LGPL-2.1-or-later
"""
Tests of the TPM interposer proxy.

  python3 -m unittest test_interposer          everything (end-to-end tests skip
                                               without swtpm/tpm2-tools)
  python3 test_interposer.py --unit            wire format and crypto only
  python3 test_interposer.py --e2e             against a real swtpm; exits 77
                                               (meson: skipped) without the tools

The crypto tests check the TPM KDFs against independent implementations
(SP 800-108 KBKDF and SP 800-56A ConcatKDF from python3-cryptography); the
end-to-end tests check the whole chain against swtpm driven by tpm2-tools.
"""

import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)

from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.kdf.concatkdf import ConcatKDFHash  # noqa: E402
from cryptography.hazmat.primitives.kdf.kbkdf import CounterLocation, KBKDFHMAC, Mode  # noqa: E402

import mutate as mt  # noqa: E402
import tpm_interposer as ti  # noqa: E402
import tpmwire as tw  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "fixture", "swtpm-fixture")
PROXY = os.path.join(HERE, "tpm-interposer")


def srk_ecc_public(x=b"", y=b""):
    """TCG SRK ECC "H" template (design §3) marshalled by hand from Part 2."""
    return (tw.u16(0x0023) + tw.u16(0x000B) + tw.u32(0x00030472) + tw.u16(0)
            + tw.u16(0x0006) + tw.u16(128) + tw.u16(0x0043)   # AES-128-CFB
            + tw.u16(0x0010)                                  # scheme NULL
            + tw.u16(0x0003)                                  # NIST P-256
            + tw.u16(0x0010)                                  # kdf NULL
            + tw.tpm2b(x) + tw.tpm2b(y))


def ek_signing_public():
    return (tw.u16(0x0023) + tw.u16(0x000B) + tw.u32(0x00050472) + tw.u16(0)
            + tw.u16(0x0010)                                  # symmetric NULL
            + tw.u16(0x0018) + tw.u16(0x000B)                 # ECDSA-SHA256
            + tw.u16(0x0003) + tw.u16(0x0010)
            + tw.tpm2b(b"") + tw.tpm2b(b""))


def rsa_ek_public():
    return (tw.u16(0x0001) + tw.u16(0x000B) + tw.u32(0x000300B2) + tw.tpm2b(bytes(32))
            + tw.u16(0x0006) + tw.u16(128) + tw.u16(0x0043) + tw.u16(0x0010)
            + tw.u16(2048) + tw.u32(0) + tw.tpm2b(bytes(256)))


def point_of(private):
    n = private.public_key().public_numbers()
    return n.x.to_bytes(32, "big"), n.y.to_bytes(32, "big")


class MarshallingTest(unittest.TestCase):
    def test_public_round_trips(self):
        k = ec.generate_private_key(ec.SECP256R1())
        for raw in (srk_ecc_public(*point_of(k)), srk_ecc_public(), ek_signing_public(), rsa_ek_public()):
            pub = tw.unmarshal_tpm2b_public(tw.tpm2b(raw))
            self.assertEqual(pub.marshal(), raw)
            self.assertEqual(tw.marshal_tpm2b_public(pub), tw.tpm2b(raw))
            self.assertEqual(pub.name(), b"\x00\x0b" + hashlib.sha256(raw).digest())

    def test_public_fields(self):
        k = ec.generate_private_key(ec.SECP256R1())
        pub = tw.unmarshal_tpm2b_public(tw.tpm2b(srk_ecc_public(*point_of(k))))
        self.assertEqual(pub.curve, tw.TPM_ECC_NIST_P256)
        self.assertEqual(pub.attributes, 0x00030472)
        self.assertTrue(pub.is_salt_capable_p256())
        self.assertEqual(pub.ec_public_key().public_numbers(), k.public_key().public_numbers())
        self.assertFalse(tw.unmarshal_tpm2b_public(tw.tpm2b(ek_signing_public())).is_salt_capable_p256())
        self.assertFalse(tw.unmarshal_tpm2b_public(tw.tpm2b(rsa_ek_public())).is_salt_capable_p256())

    def test_public_truncated_and_trailing(self):
        k = ec.generate_private_key(ec.SECP256R1())
        for raw in (srk_ecc_public(*point_of(k)), ek_signing_public(), rsa_ek_public()):
            full = tw.tpm2b(raw)
            for n in range(len(full)):
                with self.assertRaises(tw.WireError, msg="prefix %d" % n):
                    tw.unmarshal_tpm2b_public(full[:n])
            with self.assertRaises(tw.WireError):
                tw.unmarshal_tpm2b_public(full + b"\0")
            # A TPM2B size that claims one byte less than the structure needs.
            with self.assertRaises(tw.WireError):
                tw.unmarshal_tpm2b_public(tw.u16(len(raw) - 1) + raw[:-1])
            # ... or one byte more, with the extra byte inside the TPM2B.
            with self.assertRaises(tw.WireError):
                tw.unmarshal_tpm2b_public(tw.u16(len(raw) + 1) + raw + b"\0")

    def test_substituted_point_keeps_template(self):
        real_k = ec.generate_private_key(ec.SECP256R1())
        real = tw.unmarshal_tpm2b_public(tw.tpm2b(srk_ecc_public(*point_of(real_k))))
        fk = ti.FakeKey(real)
        self.assertEqual(fk.fake.marshal()[:-68], real.marshal()[:-68])
        self.assertNotEqual(fk.fake_name, fk.real_name)
        self.assertEqual(len(fk.fake.marshal()), len(real.marshal()))
        self.assertEqual(fk.fake.ec_public_key().public_numbers(), fk.private.public_key().public_numbers())

    def test_command_round_trip(self):
        auths = [tw.AuthCommand(0x02000000, b"n" * 32, 0x21, b"h" * 32), tw.AuthCommand(tw.TPM_RS_PW, b"", 0, b"pw")]
        area = b"".join(a.marshal() for a in auths)
        params = tw.tpm2b(b"sensitive") + tw.tpm2b(b"public")
        body = tw.u32(0x80000000) + tw.u32(len(area)) + area + params
        raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x153) + body
        c = tw.Command(raw)
        self.assertEqual(c.name, "Create")
        self.assertEqual(c.handles, [0x80000000])
        self.assertEqual([a.handle for a in c.auths], [0x02000000, tw.TPM_RS_PW])
        self.assertEqual(c.auths[0].attrs, 0x21)
        self.assertEqual(c.auths[1].hmac, b"pw")
        self.assertEqual(c.params, params)
        self.assertEqual(c.marshal(), raw)
        c.params = tw.tpm2b(b"other") + tw.tpm2b(b"public!")
        again = tw.Command(c.marshal())
        self.assertEqual(again.params, c.params)

    def test_command_malformed(self):
        raw = tw.build_command(0x173, [0x81000001])
        self.assertEqual(tw.Command(raw).handles, [0x81000001])
        for n in range(len(raw)):
            with self.assertRaises(tw.WireError):
                tw.Command(raw[:n])
        # The size field must match what was read.
        with self.assertRaises(tw.WireError):
            tw.Command(raw + b"\0")
        # An authorization size reaching past the end.
        bad = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(18) + tw.u32(0x15E) + tw.u32(0x80000001) + tw.u32(100)
        with self.assertRaises(tw.WireError):
            tw.Command(bad)
        # An empty authorization area with the sessions tag.
        bad = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(18) + tw.u32(0x15E) + tw.u32(0x80000001) + tw.u32(0)
        with self.assertRaises(tw.WireError):
            tw.Command(bad)
        with self.assertRaises(tw.WireError):
            tw.Command(tw.u16(0x1234) + raw[2:])

    def test_response_round_trip_and_truncation(self):
        params = tw.tpm2b(b"\x11" * 16)
        auth = tw.AuthResponse(b"t" * 32, 0x41, b"m" * 32)
        body = tw.u32(len(params)) + params + auth.marshal()
        raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0) + body
        r = tw.Response(raw, 0x17B, 1)
        self.assertTrue(r.parsed)
        self.assertEqual(r.params, params)
        self.assertEqual(r.auths[0].nonce, b"t" * 32)
        self.assertEqual(r.marshal(), raw)
        with self.assertRaises(tw.WireError):
            tw.Response(raw, 0x17B, 2)  # session count must match the command
        for n in range(10, len(raw)):
            cut = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(n) + raw[6:n]
            with self.assertRaises(tw.WireError, msg="length %d" % n):
                tw.Response(cut, 0x17B, 1)
        err = tw.Response(tw.error_response(tw.TPM_RC_RETRY), 0x17B, 1)
        self.assertFalse(err.parsed)
        self.assertEqual(err.rc, tw.TPM_RC_RETRY)
        self.assertEqual(err.marshal(), tw.error_response(tw.TPM_RC_RETRY))

    def test_cc_names(self):
        self.assertEqual(tw.parse_cc("PCR_Extend"), 0x182)
        self.assertEqual(tw.parse_cc("TPM2_CC_GetRandom"), 0x17B)
        self.assertEqual(tw.parse_cc("0x15e"), 0x15E)
        with self.assertRaises(ValueError):
            tw.parse_cc("NoSuchCommand")
        self.assertEqual(ti.parse_tamper("PCR_Read:20:0xff"), (0x17E, 20, 0xFF, None))
        self.assertEqual(ti.parse_tamper("PolicyGetDigest:2:0x01:1"), (0x189, 2, 0x01, 1))
        self.assertEqual(ti.parse_cc_count("PCR_Extend:2", "x"), (0x182, 2))
        self.assertEqual(ti.parse_cc_count("GetRandom", "x"), (0x17B, None))


class KdfTest(unittest.TestCase):
    def test_kdfa_matches_sp800_108(self):
        key = bytes(range(32))
        for bits in (128, 256, 256 + 128, 600):
            k = KBKDFHMAC(algorithm=hashes.SHA256(), mode=Mode.CounterMode, length=bits // 8, rlen=4, llen=4,
                          location=CounterLocation.BeforeFixed, label=b"CFB", context=b"U" * 32 + b"V" * 20,
                          fixed=None)
            self.assertEqual(tw.kdfa(tw.TPM_ALG_SHA256, key, "CFB", b"U" * 32, b"V" * 20, bits), k.derive(key))

    def test_kdfa_partial_byte_masks_high_bits(self):
        full = tw.kdfa(tw.TPM_ALG_SHA256, b"k", "ATH", b"", b"", 12)
        self.assertEqual(len(full), 2)
        self.assertLess(full[0], 16)

    def test_kdfe_matches_sp800_56a(self):
        z = bytes(range(32))
        u, v = b"\x01" * 32, b"\x02" * 32
        k = ConcatKDFHash(algorithm=hashes.SHA256(), length=32, otherinfo=b"SECRET\0" + u + v)
        self.assertEqual(tw.kdfe(tw.TPM_ALG_SHA256, z, "SECRET", u, v, 256), k.derive(z))

    def test_session_key(self):
        self.assertEqual(tw.session_key(tw.TPM_ALG_SHA256, b"", b"", b"t" * 32, b"c" * 32), b"")
        sk = tw.session_key(tw.TPM_ALG_SHA256, b"a", b"s" * 32, b"t" * 32, b"c" * 32)
        self.assertEqual(sk, tw.kdfa(tw.TPM_ALG_SHA256, b"a" + b"s" * 32, "ATH", b"t" * 32, b"c" * 32, 256))
        self.assertNotEqual(sk, tw.session_key(tw.TPM_ALG_SHA256, b"a", b"s" * 32, b"c" * 32, b"t" * 32))


class SaltTest(unittest.TestCase):
    def tpm_key(self):
        priv = ec.generate_private_key(ec.SECP256R1())
        return priv, tw.unmarshal_tpm2b_public(tw.tpm2b(srk_ecc_public(*point_of(priv))))

    def test_ecdh_salt_round_trip(self):
        priv, pub = self.tpm_key()
        salt, enc = tw.ecc_salt_encrypt(pub)
        self.assertEqual(len(salt), 32)
        self.assertEqual(tw.ecc_salt_decrypt(priv, pub, enc), salt)
        other, _ = self.tpm_key()
        self.assertNotEqual(tw.ecc_salt_decrypt(other, pub, enc), salt)
        for n in range(len(enc)):
            with self.assertRaises(tw.WireError):
                tw.ecc_salt_decrypt(priv, pub, enc[:n])

    def test_salt_is_kdfe_of_ecdh(self):
        priv, pub = self.tpm_key()
        eph = ec.generate_private_key(ec.SECP256R1())
        salt, enc = tw.ecc_salt_encrypt(pub, eph)
        z = eph.exchange(ec.ECDH(), priv.public_key())
        ex, _ = point_of(eph)
        k = ConcatKDFHash(algorithm=hashes.SHA256(), length=32, otherinfo=b"SECRET\0" + ex + pub.x)
        self.assertEqual(salt, k.derive(z))

    def test_proxy_decrypts_and_reencrypts(self):
        real_priv, real = self.tpm_key()
        fk = ti.FakeKey(real)
        client_salt, client_enc = tw.ecc_salt_encrypt(fk.fake)        # the client salts to the fake key
        self.assertEqual(tw.ecc_salt_decrypt(fk.private, fk.fake, client_enc), client_salt)
        tpm_salt, tpm_enc = tw.ecc_salt_encrypt(fk.real)              # the proxy salts to the real key
        self.assertEqual(tw.ecc_salt_decrypt(real_priv, real, tpm_enc), tpm_salt)
        # The real key cannot open what the client sent: the attack needs the translation.
        self.assertNotEqual(tw.ecc_salt_decrypt(real_priv, real, client_enc), client_salt)


class ParamEncryptionTest(unittest.TestCase):
    SYM = (tw.TPM_ALG_AES, 128, tw.TPM_ALG_CFB)

    def test_cfb_round_trip(self):
        value = b"k" * 32 + b"auth"
        for data in (b"", b"x", b"secret data of 23 bytes", bytes(range(256)) * 3):
            ct = tw.param_crypt(self.SYM, tw.TPM_ALG_SHA256, value, b"N" * 32, b"O" * 32, data, True)
            self.assertEqual(len(ct), len(data))
            if len(data) > 4:
                self.assertNotEqual(ct, data)
            self.assertEqual(tw.param_crypt(self.SYM, tw.TPM_ALG_SHA256, value, b"N" * 32, b"O" * 32, ct, False),
                             data)
            if data:
                self.assertNotEqual(
                    tw.param_crypt(self.SYM, tw.TPM_ALG_SHA256, value, b"O" * 32, b"N" * 32, ct, False), data)

    def test_cfb_key_and_iv_from_kdfa(self):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        kiv = tw.kdfa(tw.TPM_ALG_SHA256, b"v", "CFB", b"a", b"b", 256)
        enc = Cipher(algorithms.AES(kiv[:16]), modes.CFB(kiv[16:])).encryptor()
        data = b"0123456789abcdefXYZ"
        self.assertEqual(tw.param_crypt(self.SYM, tw.TPM_ALG_SHA256, b"v", b"a", b"b", data, True),
                         enc.update(data) + enc.finalize())

    def test_xor_round_trip(self):
        sym = (tw.TPM_ALG_XOR, tw.TPM_ALG_SHA256, 0)
        ct = tw.param_crypt(sym, tw.TPM_ALG_SHA256, b"v", b"a", b"b", b"secret", True)
        self.assertNotEqual(ct, b"secret")
        self.assertEqual(tw.param_crypt(sym, tw.TPM_ALG_SHA256, b"v", b"a", b"b", ct, False), b"secret")

    def test_unsupported_mode(self):
        with self.assertRaises(tw.WireError):
            tw.param_crypt((tw.TPM_ALG_AES, 128, 0x0044), tw.TPM_ALG_SHA256, b"v", b"a", b"b", b"x", True)


class PinCrackTest(unittest.TestCase):
    def capture(self, auth, key=b"K" * 32):
        cp = tw.cp_hash(tw.TPM_ALG_SHA256, 0x15E, [b"\x00\x0b" + b"n" * 32], b"")
        mac = tw.session_hmac(tw.TPM_ALG_SHA256, key + tw.strip_auth(auth), cp, b"c" * 32, b"t" * 32, b"", 0x01)
        return ti.HmacCapture("Unseal", "0x03000000", tw.TPM_ALG_SHA256, key, cp, b"c" * 32, b"t" * 32, b"", 0x01,
                              mac)

    def test_raw_and_sha256_pins(self):
        pin, t, auth, _ = ti.crack(self.capture(b"4711"), ti.pin_transforms(None), None)
        self.assertEqual((pin, t, auth), ("4711", "raw", b"4711"))
        pin, t, _, tried = ti.crack(self.capture(hashlib.sha256(b"0042").digest(), key=b""),
                                    ti.pin_transforms(None), None)
        self.assertEqual((pin, t), ("0042", "sha256"))
        self.assertEqual(tried, 10000 + 43)

    def test_wordlist_and_not_found(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("letmein\nhunter2\n")
            f.flush()
            pin, t, _, _ = ti.crack(self.capture(hashlib.sha256(b"hunter2").digest()), ti.pin_transforms(None),
                                    f.name)
            self.assertEqual((pin, t), ("hunter2", "sha256"))
            pin, _, _, tried = ti.crack(self.capture(b"correct horse"), ti.pin_transforms(None), f.name)
            self.assertIsNone(pin)
            self.assertEqual(tried, 2 * 10002)

    def test_systemd_salted_pin(self):
        salt = bytes(range(32))
        derived = hashlib.pbkdf2_hmac("sha256", b"0002", salt, 10000, 32)
        import base64
        auth = hashlib.sha256(base64.b64encode(derived)).digest()
        systemd = [t for t in ti.pin_transforms(salt) if t[0] == "systemd-pbkdf2-sha256"]
        pin, t, _, tried = ti.crack(self.capture(auth), systemd, None)
        self.assertEqual((pin, t, tried), ("0002", "systemd-pbkdf2-sha256", 3))

    def test_trailing_zeros_are_not_part_of_the_key(self):
        self.assertTrue(self.capture(b"12\0\0").matches(b"12"))


class ProxyLogicTest(unittest.TestCase):
    """The proxy's passive analysis on hand-built traffic (no TPM needed)."""

    def proxy(self):
        with tempfile.NamedTemporaryFile() as f:
            args = ti.parse_args(["--listen", "/nonexistent/x", "--upstream", f.name, "--mode", "pin-crack"])
        return ti.Proxy(args)

    def test_clear_create_and_password_session(self):
        p = self.proxy()
        sensitive = tw.tpm2b(tw.tpm2b(b"1234") + tw.tpm2b(b"data"))
        params = sensitive + tw.tpm2b(b"public") + tw.tpm2b(b"") + tw.u32(0)
        auth = tw.AuthCommand(tw.TPM_RS_PW, b"", 0, b"ownerpw")
        area = auth.marshal()
        body = tw.u32(0x81000001) + tw.u32(len(area)) + area + params
        raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x153) + body
        cmd = tw.Command(raw)
        p.preprocess(None, cmd, ti.CommandContext(cmd))
        d = p.findings.data
        self.assertEqual({(a["kind"], a["auth_value"]) for a in d["auth_values"]},
                         {("password-session", b"ownerpw".hex()), ("inSensitive.userAuth", b"1234".hex())})
        self.assertEqual([(x["user_auth"], x["sensitive_data"], x["in_clear"]) for x in d["plaintexts"]],
                         [(b"1234".hex(), b"data".hex(), True)])
        self.assertEqual(sorted(p.known_auths), [b"1234", b"ownerpw"])

    def test_empty_sensitive_is_not_a_secret(self):
        p = self.proxy()
        params = tw.tpm2b(tw.tpm2b(b"") + tw.tpm2b(b"")) + tw.tpm2b(b"public")
        raw = tw.build_command(0x153, [0x80000000], params)
        cmd = tw.Command(raw)
        p.preprocess(None, cmd, ti.CommandContext(cmd))
        self.assertEqual(p.findings.data["plaintexts"], [])


class Issue29ModesTest(unittest.TestCase):
    """redirect-salt and tamper-hmac on hand-built traffic (no TPM needed)."""

    def proxy(self, *extra):
        with tempfile.NamedTemporaryFile() as f:
            args = ti.parse_args(["--listen", "/nonexistent/x", "--upstream", f.name] + list(extra))
        return ti.Proxy(args)

    @staticmethod
    def start_auth_session(se):
        params = tw.tpm2b(b"n" * 32) + tw.tpm2b(b"salt") + bytes([se]) + tw.u16(0x0010) + tw.u16(0x000B)
        return tw.Command(tw.build_command(0x176, [0x80000001, tw.TPM_RH_NULL], params))

    def test_redirect_salt_only_policy_sessions(self):
        p = self.proxy("--mode", "redirect-salt")
        hmac, policy = self.start_auth_session(tw.TPM_SE_HMAC), self.start_auth_session(tw.TPM_SE_POLICY)
        p.redirect_salt(hmac, 1)
        p.redirect_salt(policy, 2)
        self.assertEqual(hmac.handles[0], 0x80000001)
        self.assertEqual(policy.handles[0], 0x81000001)
        self.assertEqual([a["attack"] for a in p.findings.data["attacks"]], ["redirect-salt"])

    def test_tamper_hmac_flips_one_bit_of_the_response_hmac(self):
        p = self.proxy("--mode", "tamper-hmac", "--tamper-hmac", "Unseal")
        auth = tw.AuthCommand(0x03000000, b"c" * 32, 0x20, b"h" * 32).marshal()
        body = tw.u32(0x80000002) + tw.u32(len(auth)) + auth
        cmd = tw.Command(tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x15E) + body)
        params = tw.tpm2b(b"secret")
        rbody = tw.u32(len(params)) + params + tw.AuthResponse(b"t" * 32, 0x20, b"\x10" * 32).marshal()
        resp = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(rbody)) + tw.u32(0) + rbody
        out = p.tamper_hmac(0x15E, 1, 1, resp, cmd)
        self.assertEqual(len(out), len(resp))
        self.assertEqual([i for i in range(len(out)) if out[i] != resp[i]], [len(resp) - 32])
        self.assertEqual(out[-32], 0x11)


class MutateTest(unittest.TestCase):
    """mutate.py: one response made hostile, reproducibly from a seed (issue 22)."""

    # An Unseal response: parameterSize 34, outData (32 bytes), one HMAC session.
    PARAMS = tw.tpm2b(bytes(range(32)))
    AUTH = tw.tpm2b(b"\x11" * 32) + bytes([1]) + tw.tpm2b(b"\x22" * 32)
    BODY = tw.u32(len(PARAMS)) + PARAMS + AUTH
    RAW = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(BODY)) + tw.u32(0) + BODY

    def test_huge_sets_parameter_size_and_first_size(self):
        out, desc, close_after, touched = mt.mutate(self.RAW, 0x15E, mt.rng_for(0, 1), "huge")
        self.assertEqual(out[10:14], b"\xff\xff\xff\xff")
        self.assertEqual(out[14:16], b"\xff\xff")
        self.assertEqual(len(out), len(self.RAW))
        self.assertTrue(touched)
        self.assertFalse(close_after)

    def test_seeded_is_reproducible_and_changes_bytes(self):
        kinds = set()
        for seed in range(200):
            a = mt.mutate(self.RAW, 0x15E, mt.rng_for(seed, 3))
            b = mt.mutate(self.RAW, 0x15E, mt.rng_for(seed, 3))
            self.assertEqual(a, b)
            kinds.add(a[1]["kind"])
            if a[1]["kind"] != "rc" or a[1].get("body_dropped") or a[1]["rc"] != "0x00000000":
                self.assertNotEqual(a[0], self.RAW, a[1])
        self.assertEqual(kinds, set(mt.KINDS))

    def test_auth_area_is_not_a_parameter(self):
        raw = bytearray(self.RAW)
        out, desc, _, touched = mt.mutate(bytes(raw), 0x15E, mt.rng_for(1, 1), "size")
        # whatever field was chosen, params_touched says whether tag, rc or the parameter area changed
        region_changed = out[0:2] != self.RAW[0:2] or out[6:10] != self.RAW[6:10] or \
            out[10:14 + len(self.PARAMS)] != self.RAW[10:14 + len(self.PARAMS)]
        self.assertEqual(touched, region_changed, desc)

    def test_short_header_size_closes(self):
        for seed in range(100):
            out, desc, close_after, _ = mt.mutate(self.RAW, 0x15E, mt.rng_for(seed, 2), "truncate")
            declared = struct.unpack(">I", out[2:6])[0] if len(out) >= 6 else None
            self.assertEqual(close_after, len(out) < 10 or declared > len(out), desc)


# --- end to end -----------------------------------------------------------------------------

E2E_TOOLS = ("swtpm", "swtpm_setup", "swtpm_ioctl", "tpm2_getrandom", "tpm2_createprimary",
             "tpm2_startauthsession", "tpm2_pcrextend", "tpm2_pcrread", "tpm2_unseal")


def missing_tools():
    return [t for t in E2E_TOOLS if shutil.which(t) is None]


@unittest.skipIf(missing_tools(), "needs swtpm, swtpm-tools and tpm2-tools (missing: %s)" % ", ".join(missing_tools()))
class EndToEndTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tpm-interposer-")
        self.tpm = os.path.join(self.dir, "tpm")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        subprocess.run([FIXTURE, "start", self.tpm], check=True, stdout=subprocess.DEVNULL)
        self.addCleanup(subprocess.run, [FIXTURE, "stop", self.tpm], stdout=subprocess.DEVNULL)
        self.sock = os.path.join(self.dir, "proxy.sock")
        self.findings = os.path.join(self.dir, "findings.json")
        self.recordf = os.path.join(self.dir, "record.jsonl")
        self.proxy = None

    def start_proxy(self, mode, *extra):
        pidfile = os.path.join(self.dir, "proxy.pid")
        self.proxy_log = open(os.path.join(self.dir, "proxy.log"), "w")
        self.addCleanup(self.proxy_log.close)
        self.proxy = subprocess.Popen(
            [sys.executable, PROXY, "--listen", self.sock, "--upstream", os.path.join(self.tpm, "tpm.sock"),
             "--mode", mode, "--findings", self.findings, "--record", self.recordf, "--pidfile", pidfile,
             "--timeout", "10", "--verbose"] + list(extra),
            stderr=self.proxy_log)
        self.addCleanup(self.stop_proxy)
        for _ in range(100):
            if os.path.exists(self.sock + ".ctrl") and os.path.exists(pidfile):
                break
            self.assertIsNone(self.proxy.poll(), "proxy exited early")
            time.sleep(0.05)
        else:
            self.fail("proxy socket did not appear")
        with open(pidfile) as f:
            self.assertEqual(int(f.read()), self.proxy.pid)

    def stop_proxy(self):
        if self.proxy is None or self.proxy.poll() is not None:
            return self.proxy.returncode if self.proxy else None
        self.proxy.send_signal(signal.SIGTERM)
        rc = self.proxy.wait(timeout=20)
        return rc

    def finish(self):
        """Stop the proxy and return its findings."""
        self.assertEqual(self.stop_proxy(), 0)
        self.assertFalse(os.path.exists(self.sock))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "proxy.pid")))
        with open(self.findings) as f:
            return json.load(f)

    def tool(self, *argv, via_proxy=True, check=True):
        env = dict(os.environ)
        env["TPM2TOOLS_TCTI"] = "swtpm:path=" + (self.sock if via_proxy else os.path.join(self.tpm, "tpm.sock"))
        p = subprocess.run(list(argv), env=env, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        if check and p.returncode != 0:
            self.fail("%s failed (%d): %s" % (argv[0], p.returncode, p.stderr.decode(errors="replace")))
        return p

    def flush_transient(self):
        self.tool("tpm2_flushcontext", "--transient-object")

    def records(self):
        with open(self.recordf) as f:
            return [json.loads(line) for line in f]

    def test_record_getrandom(self):
        self.start_proxy("record")
        out = self.tool("tpm2_getrandom", "--hex", "16").stdout.decode()
        self.assertRegex(out, r"^[0-9a-f]{32}$")
        f = self.finish()
        recs = self.records()
        cmds = [r for r in recs if r["dir"] == "command" and r["command"] == "GetRandom"]
        resps = [r for r in recs if r["dir"] == "response" and r["command"] == "GetRandom"]
        self.assertEqual(len(cmds), 1)
        self.assertEqual(resps[0]["rc"], "0x00000000")
        self.assertIn(out, resps[0]["hex"])
        self.assertEqual(f["attacks"], [])
        self.assertGreaterEqual(f["commands"], 2)
        # Unencrypted random bytes are reported as having crossed in clear.
        self.assertIn(out, [p["data"] for p in f["plaintexts"] if p["in_clear"]])

    def test_substitute_salted_session_against_unverifying_client(self):
        self.start_proxy("substitute")
        self.tool("tpm2_createprimary", "-C", "n", "-G", "ecc", "-c", "null.ctx")
        client_name = self.tool("tpm2_readpublic", "-c", "null.ctx").stdout.decode()
        self.flush_transient()
        self.tool("tpm2_startauthsession", "--hmac-session", "-c", "null.ctx", "-S", "s.ctx")
        self.flush_transient()
        rnd = self.tool("tpm2_getrandom", "--hex", "24", "-S", "s.ctx").stdout.decode()
        self.tool("tpm2_flushcontext", "s.ctx")
        self.flush_transient()
        self.assertRegex(rnd, r"^[0-9a-f]{48}$")
        # The real NULL key, straight from swtpm.
        self.tool("tpm2_createprimary", "-C", "n", "-G", "ecc", "-c", "real.ctx", via_proxy=False)
        real_name = self.tool("tpm2_readpublic", "-c", "real.ctx", via_proxy=False).stdout.decode()
        self.tool("tpm2_flushcontext", "--transient-object", via_proxy=False)
        f = self.finish()
        attacks = [a["attack"] for a in f["attacks"]]
        self.assertIn("substitute-public", attacks)
        self.assertIn("salt-reencrypt", attacks)
        sub = next(a for a in f["attacks"] if a["attack"] == "substitute-public")
        self.assertEqual(sub["hierarchy"], "null")
        self.assertIn("name: " + sub["fake_name"], client_name)
        self.assertIn("name: " + sub["real_name"], real_name)
        salted = [k for k in f["session_keys"] if k["via"] == "salt to substituted key"]
        self.assertEqual(len(salted), 1)
        self.assertEqual(len(salted[0]["session_key"]), 64)
        self.assertNotEqual(salted[0]["session_key"], salted[0]["tpm_session_key"])
        self.assertIn(rnd, [p["data"] for p in f["plaintexts"] if not p["in_clear"]])
        self.assertEqual(f["errors"], [])
        self.assertEqual(f["hmac_untranslated"], [])

    def test_substitute_first_only(self):
        """--substitute-first 1: the first NULL key is swapped, the second passes genuine and its session
        stays opaque (the client salted to the real key), so nothing breaks after the first."""
        self.start_proxy("substitute", "--substitute-first", "1")
        first = self.tool("tpm2_createprimary", "-C", "n", "-G", "ecc", "-c", "first.ctx").stdout.decode()
        self.flush_transient()
        second = self.tool("tpm2_createprimary", "-C", "n", "-G", "ecc", "-c", "second.ctx").stdout.decode()
        self.flush_transient()
        self.tool("tpm2_startauthsession", "--hmac-session", "-c", "second.ctx", "-S", "s.ctx")
        self.flush_transient()
        rnd = self.tool("tpm2_getrandom", "--hex", "24", "-S", "s.ctx").stdout.decode()
        self.tool("tpm2_flushcontext", "s.ctx")
        self.assertRegex(rnd, r"^[0-9a-f]{48}$")
        f = self.finish()
        sub = [a for a in f["attacks"] if a["attack"] == "substitute-public"]
        # the first key's CreatePrimary (and tpm2_flushcontext's ReadPublic of it), never the second's
        self.assertEqual([a["command"] for a in sub if a["command"] == "CreatePrimary"], ["CreatePrimary"])
        self.assertEqual(len({a["fake_name"] for a in sub}), 1)
        # The real NULL key, straight from swtpm: the second answer is it, the first is not.
        real = self.tool("tpm2_createprimary", "-C", "n", "-G", "ecc", "-c", "real.ctx", via_proxy=False).stdout.decode()
        self.tool("tpm2_flushcontext", "--transient-object", via_proxy=False)
        point = lambda out: [line for line in out.splitlines() if line.startswith(("x:", "y:"))]
        self.assertEqual(point(second), point(real))
        self.assertNotEqual(point(first), point(real))
        self.assertNotIn("salt-reencrypt", [a["attack"] for a in f["attacks"]])
        self.assertEqual(len(f["opaque_sessions"]), 1)
        self.assertEqual(f["errors"], [])

    def test_substitute_persistent_srk(self):
        """systemd's path: a persistent SRK at 0x81000001 read with ReadPublic, then a salted session."""
        direct = dict(via_proxy=False)
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk.ctx", **direct)
        self.tool("tpm2_evictcontrol", "-C", "o", "-c", "srk.ctx", "0x81000001", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        real = self.tool("tpm2_readpublic", "-c", "0x81000001", **direct).stdout.decode()
        self.start_proxy("substitute")
        seen = self.tool("tpm2_readpublic", "-c", "0x81000001").stdout.decode()
        self.tool("tpm2_startauthsession", "--hmac-session", "-c", "0x81000001", "-S", "s.ctx")
        rnd = self.tool("tpm2_getrandom", "--hex", "20", "-S", "s.ctx").stdout.decode()
        self.tool("tpm2_flushcontext", "s.ctx")
        f = self.finish()
        sub = [a for a in f["attacks"] if a["attack"] == "substitute-public"]
        self.assertTrue(sub)
        self.assertTrue(all(a["command"] == "ReadPublic" and a["handle"] == "0x81000001" for a in sub))
        self.assertIn("name: " + sub[0]["real_name"], real)
        self.assertIn("name: " + sub[0]["fake_name"], seen)
        self.assertIn(rnd, [p["data"] for p in f["plaintexts"] if not p["in_clear"]])
        keys = [k for k in f["session_keys"] if k["via"] == "salt to substituted key"]
        self.assertEqual([k["salted_to"] for k in keys], ["0x81000001"])
        self.assertTrue(keys[0]["verified"])

    def test_substitute_and_pin_crack_unseal(self):
        """The systemd-style attack: a salted session to an unverified SRK, a PIN, an unseal."""
        with open(os.path.join(self.dir, "secret"), "wb") as f:
            f.write(b"disk secret 0123")
        # Enrolment happened earlier, without the interposer (else it would
        # have seen the authValue in Create's clear inSensitive).
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk0.ctx", via_proxy=False)
        self.tool("tpm2_create", "-C", "srk0.ctx", "-i", "secret", "-p", "hex:" + hashlib.sha256(b"0815").hexdigest(),
                  "-u", "o.pub", "-r", "o.priv", via_proxy=False)
        self.tool("tpm2_flushcontext", "--transient-object", via_proxy=False)
        self.start_proxy("substitute,pin-crack")
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk.ctx")
        self.flush_transient()
        self.tool("tpm2_load", "-C", "srk.ctx", "-u", "o.pub", "-r", "o.priv", "-c", "o.ctx")
        self.flush_transient()
        self.tool("tpm2_startauthsession", "--hmac-session", "-c", "srk.ctx", "-S", "s.ctx")
        self.flush_transient()
        out = self.tool("tpm2_unseal", "-c", "o.ctx", "-p",
                        "session:s.ctx+hex:" + hashlib.sha256(b"0815").hexdigest()).stdout
        self.tool("tpm2_flushcontext", "s.ctx")
        self.flush_transient()
        self.assertEqual(out, b"disk secret 0123")
        f = self.finish()
        self.assertEqual([(p["pin"], p["transform"]) for p in f["pins"]], [("0815", "sha256")])
        # tpm2_load authorised the swapped parent in an unsalted HMAC session: the
        # proxy recomputed that HMAC with the real name, else Load would have failed.
        self.assertIn(("Load", "substituted name in cpHash"),
                      [(a.get("command"), a.get("reason")) for a in f["attacks"] if a["attack"] == "hmac-recompute"])
        self.assertTrue(all(k["verified"] for k in f["session_keys"] if k["via"] == "salt to substituted key"))
        self.assertIn(b"disk secret 0123".hex(), [p.get("unsealed") for p in f["plaintexts"]])
        self.assertEqual(f["hmac_untranslated"], [])

    def test_pin_crack_unsalted_policy_session(self):
        """PolicyAuthValue in an unsalted, unbound policy session: the HMAC key is the PIN alone."""
        with open(os.path.join(self.dir, "secret"), "wb") as f:
            f.write(b"sealed under a PIN")
        direct = dict(via_proxy=False)
        self.tool("tpm2_startauthsession", "-S", "trial.ctx", **direct)
        self.tool("tpm2_policyauthvalue", "-S", "trial.ctx", "-L", "policy.dat", **direct)
        self.tool("tpm2_flushcontext", "trial.ctx", **direct)
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk.ctx", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        self.tool("tpm2_create", "-C", "srk.ctx", "-i", "secret", "-L", "policy.dat", "-p", "2468",
                  "-a", "fixedtpm|fixedparent", "-u", "o.pub", "-r", "o.priv", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        self.tool("tpm2_load", "-C", "srk.ctx", "-u", "o.pub", "-r", "o.priv", "-c", "o.ctx", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        self.start_proxy("pin-crack")
        self.tool("tpm2_startauthsession", "--policy-session", "-S", "p.ctx")
        self.tool("tpm2_policyauthvalue", "-S", "p.ctx")
        out = self.tool("tpm2_unseal", "-c", "o.ctx", "-p", "session:p.ctx+2468").stdout
        self.tool("tpm2_flushcontext", "p.ctx")
        self.flush_transient()
        self.assertEqual(out, b"sealed under a PIN")
        f = self.finish()
        self.assertEqual([(p["pin"], p["transform"]) for p in f["pins"]], [("2468", "raw")])
        self.assertEqual([c["result"] for c in f["pin_crack"]], ["found"])
        self.assertIn(out.hex(), [p.get("unsealed", p["data"]) for p in f["plaintexts"]])
        # Nothing active happened: pin-crack alone only listens.
        self.assertEqual([a["attack"] for a in f["attacks"]], ["pin-crack"])
        self.assertEqual(self.records()[-1]["upstream_hex"], None)

    def seal(self, secret, auth_hex, policy=None):
        """Enrol a sealed object straight at swtpm (no interposer): o.pub, o.priv, o.ctx."""
        with open(os.path.join(self.dir, "secret"), "wb") as f:
            f.write(secret)
        direct = dict(via_proxy=False)
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk.ctx", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        extra = ["-L", policy, "-a", "fixedtpm|fixedparent"] if policy else []
        self.tool("tpm2_create", "-C", "srk.ctx", "-i", "secret", "-p", "hex:" + auth_hex, "-u", "o.pub",
                  "-r", "o.priv", *extra, **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)
        self.tool("tpm2_load", "-C", "srk.ctx", "-u", "o.pub", "-r", "o.priv", "-c", "o.ctx", **direct)
        self.tool("tpm2_flushcontext", "--transient-object", **direct)

    def test_pin_crack_systemd_salted_pin(self):
        """systemd >= 253's PIN: SHA-256(base64(PBKDF2-HMAC-SHA256(pin, salt, 10000))), in an unsalted session."""
        import base64
        salt = os.urandom(32)
        auth = hashlib.sha256(base64.b64encode(hashlib.pbkdf2_hmac("sha256", b"0003", salt, 10000, 32))).hexdigest()
        self.seal(b"systemd-style secret", auth)
        self.start_proxy("pin-crack", "--pin-salt", salt.hex())
        self.tool("tpm2_startauthsession", "--hmac-session", "-S", "h.ctx")
        self.tool("tpm2_unseal", "-c", "o.ctx", "-p", "session:h.ctx+hex:" + auth)
        self.tool("tpm2_flushcontext", "h.ctx")
        self.flush_transient()
        f = self.finish()  # waits for the PBKDF2 search
        self.assertEqual([(p["pin"], p["transform"]) for p in f["pins"]], [("0003", "systemd-pbkdf2-sha256")])

    def test_record_sees_clear_secrets(self):
        """A client without parameter encryption leaks the authValue and the unsealed data."""
        self.start_proxy("record")
        with open(os.path.join(self.dir, "secret"), "wb") as f:
            f.write(b"in the clear")
        self.tool("tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", "srk.ctx")
        self.flush_transient()
        self.tool("tpm2_create", "-C", "srk.ctx", "-i", "secret", "-p", "9876", "-u", "o.pub", "-r", "o.priv")
        self.flush_transient()
        self.tool("tpm2_load", "-C", "srk.ctx", "-u", "o.pub", "-r", "o.priv", "-c", "o.ctx")
        self.flush_transient()
        self.assertEqual(self.tool("tpm2_unseal", "-c", "o.ctx", "-p", "9876").stdout, b"in the clear")
        self.flush_transient()
        f = self.finish()
        kinds = {(a["kind"], bytes.fromhex(a["auth_value"])) for a in f["auth_values"]}
        self.assertIn(("inSensitive.userAuth", b"9876"), kinds)
        # tpm2_unseal sent the PIN in an unsalted HMAC session; having learnt
        # the authValue from Create, the proxy verified that session's HMAC.
        self.assertTrue(all(k["verified"] for k in f["session_keys"]))
        self.assertIn(b"in the clear".hex(), [p.get("unsealed") for p in f["plaintexts"] if p["in_clear"]])
        self.assertEqual(f["attacks"], [])

    def test_upstream_hang_does_not_hang_the_client(self):
        self.start_proxy("record", "--timeout", "2")
        with open(os.path.join(self.tpm, "swtpm.pid")) as pf:
            swtpm = int(pf.read())
        os.kill(swtpm, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            p = self.tool("tpm2_getrandom", "--hex", "8", check=False)
            elapsed = time.monotonic() - t0
        finally:
            os.kill(swtpm, signal.SIGCONT)
        self.assertNotEqual(p.returncode, 0)
        self.assertLess(elapsed, 20)
        f = self.finish()
        self.assertTrue(any("TimeoutError" in e["error"] for e in f["errors"]))

    def test_control_channel_is_forwarded(self):
        direct = subprocess.run(["swtpm_ioctl", "--unix", os.path.join(self.tpm, "tpm.sock.ctrl"), "-c"],
                                stdout=subprocess.PIPE, check=True, timeout=30).stdout
        self.start_proxy("record")
        proxied = subprocess.run(["swtpm_ioctl", "--unix", self.sock + ".ctrl", "-c"],
                                 stdout=subprocess.PIPE, check=True, timeout=30).stdout
        self.finish()
        self.assertTrue(direct)
        self.assertEqual(direct, proxied)

    def test_reset_replays_pcr_extend(self):
        digest = hashlib.sha256(b"measured boot").hexdigest()
        expected = hashlib.sha256(bytes(32) + bytes.fromhex(digest)).hexdigest()
        null_before = os.path.join(self.dir, "null1")
        subprocess.run([FIXTURE, "null-name", self.tpm, null_before], check=True)
        self.start_proxy("reset", "--reset-after", "PCR_Extend:1")
        self.tool("tpm2_pcrextend", "16:sha256=" + digest)
        out = self.tool("tpm2_pcrread", "sha256:16").stdout.decode()
        f = self.finish()
        null_after = os.path.join(self.dir, "null2")
        subprocess.run([FIXTURE, "null-name", self.tpm, null_after], check=True)
        self.assertIn("0x" + expected.upper(), out)
        resets = [a for a in f["attacks"] if a["attack"] == "reset"]
        self.assertEqual(len(resets), 1)
        self.assertEqual(resets[0]["replayed_pcr_extends"], 1)
        self.assertEqual(resets[0]["replay_rcs"], ["0x00000000"])
        # It really was a TPM reset: the NULL seed, and so the NULL key's name, changed.
        with open(null_before) as a, open(null_after) as b:
            self.assertNotEqual(a.read(), b.read())

    def test_tamper_changes_output(self):
        self.tool("tpm2_pcrextend", "16:sha256=" + "ab" * 32, via_proxy=False)
        honest = self.tool("tpm2_pcrread", "sha256:16", via_proxy=False).stdout.decode()
        # PCR_Read parameters: updateCounter(4) TPML_PCR_SELECTION(4+2+1+3) TPML_DIGEST count(4) size(2) digest
        self.start_proxy("tamper", "--tamper", "PCR_Read:20:0xff")
        tampered = self.tool("tpm2_pcrread", "sha256:16").stdout.decode()
        f = self.finish()
        self.assertNotEqual(honest, tampered)
        self.assertEqual([a["attack"] for a in f["attacks"]], ["tamper"])
        first = lambda text: text.split("0x", 1)[1][:2]  # noqa: E731
        self.assertEqual(int(first(honest), 16) ^ 0xFF, int(first(tampered), 16))

    def test_drop_close_fails_the_client(self):
        self.start_proxy("drop", "--drop", "GetRandom", "--drop-action", "close")
        p = self.tool("tpm2_getrandom", "--hex", "8", check=False)
        f = self.finish()
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual([a["attack"] for a in f["attacks"]], ["drop"])

    def test_drop_retry_runs_command_twice(self):
        self.start_proxy("drop", "--drop", "GetRandom:1", "--drop-action", "retry")
        out = self.tool("tpm2_getrandom", "--hex", "8").stdout.decode()
        f = self.finish()
        self.assertRegex(out, r"^[0-9a-f]{16}$")
        self.assertEqual(len([r for r in self.records() if r["dir"] == "command" and r["command"] == "GetRandom"]),
                         2)
        self.assertEqual([a["attack"] for a in f["attacks"]], ["drop"])

    def test_replay_repeats_a_response(self):
        self.start_proxy("replay", "--replay", "GetRandom")
        a = self.tool("tpm2_getrandom", "--hex", "16").stdout
        b = self.tool("tpm2_getrandom", "--hex", "16").stdout
        f = self.finish()
        self.assertEqual(a, b)
        self.assertEqual([x["attack"] for x in f["attacks"]], ["replay"])

    def test_bad_size_field_closes_client_without_hang(self):
        import socket
        self.start_proxy("record")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.sock)
        s.sendall(struct.pack(">HII", 0x8001, 0x100000, 0x17B))
        self.assertEqual(s.recv(100), b"")  # closed, not hung
        s.close()
        f = self.finish()
        self.assertTrue(any("out of range" in e["error"] for e in f["errors"]))


def main():
    argv = sys.argv[1:]
    loader = unittest.TestLoader()
    unit = [MarshallingTest, KdfTest, SaltTest, ParamEncryptionTest, PinCrackTest, ProxyLogicTest, MutateTest]
    if "--e2e" in argv:
        missing = missing_tools()
        if missing:
            print("SKIP: end-to-end interposer tests need %s (apt-get install swtpm swtpm-tools tpm2-tools)"
                  % ", ".join(missing))
            return 77
        classes = [EndToEndTest]
    elif "--unit" in argv:
        classes = unit
    else:
        classes = unit + [EndToEndTest]
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(c) for c in classes)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
