# SPDX-License-Identifier: LGPL-2.1-or-later
"""
TPM 2.0 wire format and session cryptography for the interposer proxy.

Written from the TPM 2.0 Library Specification:
  Part 1 (Architecture): 11.4.10 KDFa/KDFe, 19.6 HMAC sessions (session key,
      cpHash/rpHash, HMAC), 21 parameter encryption (CFB and XOR), C.6.1 ECC
      secret sharing for salted sessions (ECDH + KDFe, label "SECRET").
  Part 2 (Structures): TPM2B, TPMT_PUBLIC, TPMS_ECC_POINT, TPMT_SYM_DEF,
      command/response headers, handle ranges.
  Part 3 (Commands): the handle counts of each command and where its
      parameters start.

Every parser checks bounds before each read and raises WireError on short or
over-long input; the top-level parsers consume their input exactly.
"""

import hashlib
import hmac as _hmac
import struct

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


class WireError(ValueError):
    """Malformed or truncated TPM structure."""


# --- Part 2 constants -------------------------------------------------------

TPM_ST_NO_SESSIONS = 0x8001
TPM_ST_SESSIONS = 0x8002

TPM_RC_SUCCESS = 0x000
TPM_RC_RETRY = 0x922

TPM_RS_PW = 0x40000009
TPM_RH_OWNER = 0x40000001
TPM_RH_NULL = 0x40000007
TPM_RH_ENDORSEMENT = 0x4000000B
TPM_RH_PLATFORM = 0x4000000C
HIERARCHY_NAMES = {TPM_RH_OWNER: "owner", TPM_RH_NULL: "null",
                   TPM_RH_ENDORSEMENT: "endorsement", TPM_RH_PLATFORM: "platform"}

TPM_ALG_RSA = 0x0001
TPM_ALG_SHA1 = 0x0004
TPM_ALG_HMAC = 0x0005
TPM_ALG_AES = 0x0006
TPM_ALG_KEYEDHASH = 0x0008
TPM_ALG_XOR = 0x000A
TPM_ALG_SHA256 = 0x000B
TPM_ALG_SHA384 = 0x000C
TPM_ALG_SHA512 = 0x000D
TPM_ALG_NULL = 0x0010
TPM_ALG_ECDAA = 0x001A
TPM_ALG_ECC = 0x0023
TPM_ALG_SYMCIPHER = 0x0025
TPM_ALG_CFB = 0x0043

TPM_ECC_NIST_P256 = 0x0003

TPM_SE_HMAC = 0x00
TPM_SE_POLICY = 0x01
TPM_SE_TRIAL = 0x03

TPMA_SESSION_CONTINUE = 0x01
TPMA_SESSION_DECRYPT = 0x20
TPMA_SESSION_ENCRYPT = 0x40

TPMA_OBJECT_RESTRICTED = 0x00010000
TPMA_OBJECT_DECRYPT = 0x00020000
TPMA_OBJECT_SIGN = 0x00040000

HASHES = {
    TPM_ALG_SHA1: "sha1",
    TPM_ALG_SHA256: "sha256",
    TPM_ALG_SHA384: "sha384",
    TPM_ALG_SHA512: "sha512",
}

MAX_COMMAND_SIZE = 8192  # swtpm/libtpms use 4096; leave headroom, still bounded


def hash_name(alg):
    try:
        return HASHES[alg]
    except KeyError:
        raise WireError("unsupported hash algorithm 0x%04x" % alg) from None


def digest_size(alg):
    return hashlib.new(hash_name(alg)).digest_size


def H(alg, *parts):
    h = hashlib.new(hash_name(alg))
    for p in parts:
        h.update(p)
    return h.digest()


# --- Part 3 command table ----------------------------------------------------
# code: (name, handles in the handle area, of those how many need authorization,
#        handles in the response handle area)
COMMANDS = {
    0x11F: ("NV_UndefineSpaceSpecial", 2, 2, 0),
    0x120: ("EvictControl", 2, 1, 0),
    0x121: ("HierarchyControl", 1, 1, 0),
    0x122: ("NV_UndefineSpace", 2, 1, 0),
    0x124: ("ChangeEPS", 1, 1, 0),
    0x125: ("ChangePPS", 1, 1, 0),
    0x126: ("Clear", 1, 1, 0),
    0x127: ("ClearControl", 1, 1, 0),
    0x128: ("ClockSet", 1, 1, 0),
    0x129: ("HierarchyChangeAuth", 1, 1, 0),
    0x12A: ("NV_DefineSpace", 1, 1, 0),
    0x12B: ("PCR_Allocate", 1, 1, 0),
    0x12C: ("PCR_SetAuthPolicy", 1, 1, 0),
    0x12D: ("PP_Commands", 1, 1, 0),
    0x12E: ("SetPrimaryPolicy", 1, 1, 0),
    0x12F: ("FieldUpgradeStart", 2, 1, 0),
    0x130: ("ClockRateAdjust", 1, 1, 0),
    0x131: ("CreatePrimary", 1, 1, 1),
    0x132: ("NV_GlobalWriteLock", 1, 1, 0),
    0x133: ("GetCommandAuditDigest", 2, 2, 0),
    0x134: ("NV_Increment", 2, 1, 0),
    0x135: ("NV_SetBits", 2, 1, 0),
    0x136: ("NV_Extend", 2, 1, 0),
    0x137: ("NV_Write", 2, 1, 0),
    0x138: ("NV_WriteLock", 2, 1, 0),
    0x139: ("DictionaryAttackLockReset", 1, 1, 0),
    0x13A: ("DictionaryAttackParameters", 1, 1, 0),
    0x13B: ("NV_ChangeAuth", 1, 1, 0),
    0x13C: ("PCR_Event", 1, 1, 0),
    0x13D: ("PCR_Reset", 1, 1, 0),
    0x13E: ("SequenceComplete", 1, 1, 0),
    0x13F: ("SetAlgorithmSet", 1, 1, 0),
    0x140: ("SetCommandCodeAuditStatus", 1, 1, 0),
    0x141: ("FieldUpgradeData", 0, 0, 0),
    0x142: ("IncrementalSelfTest", 0, 0, 0),
    0x143: ("SelfTest", 0, 0, 0),
    0x144: ("Startup", 0, 0, 0),
    0x145: ("Shutdown", 0, 0, 0),
    0x146: ("StirRandom", 0, 0, 0),
    0x147: ("ActivateCredential", 2, 2, 0),
    0x148: ("Certify", 2, 2, 0),
    0x149: ("PolicyNV", 3, 1, 0),
    0x14A: ("CertifyCreation", 2, 1, 0),
    0x14B: ("Duplicate", 2, 1, 0),
    0x14C: ("GetTime", 2, 2, 0),
    0x14D: ("GetSessionAuditDigest", 3, 2, 0),
    0x14E: ("NV_Read", 2, 1, 0),
    0x14F: ("NV_ReadLock", 2, 1, 0),
    0x150: ("ObjectChangeAuth", 2, 1, 0),
    0x151: ("PolicySecret", 2, 1, 0),
    0x152: ("Rewrap", 2, 1, 0),
    0x153: ("Create", 1, 1, 0),
    0x154: ("ECDH_ZGen", 1, 1, 0),
    0x155: ("HMAC", 1, 1, 0),
    0x156: ("Import", 1, 1, 0),
    0x157: ("Load", 1, 1, 1),
    0x158: ("Quote", 1, 1, 0),
    0x159: ("RSA_Decrypt", 1, 1, 0),
    0x15B: ("HMAC_Start", 1, 1, 1),
    0x15C: ("SequenceUpdate", 1, 1, 0),
    0x15D: ("Sign", 1, 1, 0),
    0x15E: ("Unseal", 1, 1, 0),
    0x160: ("PolicySigned", 2, 0, 0),
    0x161: ("ContextLoad", 0, 0, 1),
    0x162: ("ContextSave", 1, 0, 0),
    0x163: ("ECDH_KeyGen", 1, 0, 0),
    0x164: ("EncryptDecrypt", 1, 1, 0),
    0x165: ("FlushContext", 0, 0, 0),
    0x167: ("LoadExternal", 0, 0, 1),
    0x168: ("MakeCredential", 1, 0, 0),
    0x169: ("NV_ReadPublic", 1, 0, 0),
    0x16A: ("PolicyAuthorize", 1, 0, 0),
    0x16B: ("PolicyAuthValue", 1, 0, 0),
    0x16C: ("PolicyCommandCode", 1, 0, 0),
    0x16D: ("PolicyCounterTimer", 1, 0, 0),
    0x16E: ("PolicyCpHash", 1, 0, 0),
    0x16F: ("PolicyLocality", 1, 0, 0),
    0x170: ("PolicyNameHash", 1, 0, 0),
    0x171: ("PolicyOR", 1, 0, 0),
    0x172: ("PolicyTicket", 1, 0, 0),
    0x173: ("ReadPublic", 1, 0, 0),
    0x174: ("RSA_Encrypt", 1, 0, 0),
    0x176: ("StartAuthSession", 2, 0, 1),
    0x177: ("VerifySignature", 1, 0, 0),
    0x178: ("ECC_Parameters", 0, 0, 0),
    0x179: ("FirmwareRead", 0, 0, 0),
    0x17A: ("GetCapability", 0, 0, 0),
    0x17B: ("GetRandom", 0, 0, 0),
    0x17C: ("GetTestResult", 0, 0, 0),
    0x17D: ("Hash", 0, 0, 0),
    0x17E: ("PCR_Read", 0, 0, 0),
    0x17F: ("PolicyPCR", 1, 0, 0),
    0x180: ("PolicyRestart", 1, 0, 0),
    0x181: ("ReadClock", 0, 0, 0),
    0x182: ("PCR_Extend", 1, 1, 0),
    0x183: ("PCR_SetAuthValue", 1, 1, 0),
    0x184: ("NV_Certify", 3, 2, 0),
    0x185: ("EventSequenceComplete", 2, 2, 0),
    0x186: ("HashSequenceStart", 0, 0, 1),
    0x187: ("PolicyPhysicalPresence", 1, 0, 0),
    0x188: ("PolicyDuplicationSelect", 1, 0, 0),
    0x189: ("PolicyGetDigest", 1, 0, 0),
    0x18A: ("TestParms", 0, 0, 0),
    0x18B: ("Commit", 1, 1, 0),
    0x18C: ("PolicyPassword", 1, 0, 0),
    0x18D: ("ZGen_2Phase", 1, 1, 0),
    0x18E: ("EC_Ephemeral", 0, 0, 0),
    0x18F: ("PolicyNvWritten", 1, 0, 0),
    0x190: ("PolicyTemplate", 1, 0, 0),
    0x191: ("CreateLoaded", 1, 1, 1),
    0x192: ("PolicyAuthorizeNV", 3, 1, 0),
    0x193: ("EncryptDecrypt2", 1, 1, 0),
    0x197: ("CertifyX509", 2, 2, 0),
}
CC_BY_NAME = {v[0].lower(): k for k, v in COMMANDS.items()}


def cc_name(cc):
    entry = COMMANDS.get(cc)
    return entry[0] if entry else "0x%08x" % cc


def parse_cc(text):
    """A command code from a name ("PCR_Extend", "TPM2_CC_PCR_Extend") or a number."""
    t = text.strip()
    low = t.lower()
    for prefix in ("tpm2_cc_", "tpm_cc_"):
        if low.startswith(prefix):
            low = low[len(prefix):]
    if low in CC_BY_NAME:
        return CC_BY_NAME[low]
    try:
        return int(t, 0)
    except ValueError:
        raise ValueError("unknown command code %r" % text) from None


# --- Primitive reader/writer --------------------------------------------------

class Reader:
    """Bounds-checked big-endian reader over a bytes object."""

    def __init__(self, data, offset=0, end=None):
        self.data = bytes(data)
        self.pos = offset
        self.end = len(self.data) if end is None else end
        if not 0 <= self.pos <= self.end <= len(self.data):
            raise WireError("bad reader bounds")

    def remaining(self):
        return self.end - self.pos

    def take(self, n):
        if n < 0 or self.remaining() < n:
            raise WireError("truncated: need %d bytes at offset %d, have %d" % (n, self.pos, self.remaining()))
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack(">H", self.take(2))[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def tpm2b(self, max_size=None):
        n = self.u16()
        if max_size is not None and n > max_size:
            raise WireError("TPM2B of %d bytes exceeds %d" % (n, max_size))
        return self.take(n)

    def done(self):
        if self.pos != self.end:
            raise WireError("%d trailing bytes" % (self.end - self.pos))


def u16(v):
    return struct.pack(">H", v)


def u32(v):
    return struct.pack(">I", v)


def tpm2b(b):
    if len(b) > 0xFFFF:
        raise WireError("TPM2B too large")
    return u16(len(b)) + bytes(b)


# --- TPMT_PUBLIC (Part 2 12.2) -------------------------------------------------

class Public:
    """A TPMT_PUBLIC. ECC keys are parsed field by field so that the point can
    be replaced; other types are kept as raw parameter/unique bytes."""

    def __init__(self, type_, name_alg, attributes, auth_policy, params, x=None, y=None, unique_raw=b""):
        self.type = type_
        self.name_alg = name_alg
        self.attributes = attributes
        self.auth_policy = auth_policy
        self.params = params          # marshalled parameters (everything between authPolicy and unique)
        self.x = x
        self.y = y
        self.unique_raw = unique_raw  # non-ECC: marshalled unique
        self.curve = None
        if type_ == TPM_ALG_ECC:
            self.curve = _ecc_params_curve(params)

    def marshal(self):
        out = u16(self.type) + u16(self.name_alg) + u32(self.attributes) + tpm2b(self.auth_policy) + self.params
        if self.type == TPM_ALG_ECC:
            out += tpm2b(self.x) + tpm2b(self.y)
        else:
            out += self.unique_raw
        return out

    def name(self):
        return u16(self.name_alg) + H(self.name_alg, self.marshal())

    def with_point(self, x, y):
        if self.type != TPM_ALG_ECC:
            raise WireError("not an ECC key")
        return Public(self.type, self.name_alg, self.attributes, self.auth_policy, self.params, x, y)

    def is_salt_capable_p256(self):
        return (self.type == TPM_ALG_ECC and self.curve == TPM_ECC_NIST_P256
                and self.attributes & TPMA_OBJECT_DECRYPT and not self.attributes & TPMA_OBJECT_SIGN
                and self.name_alg in HASHES)

    def ec_public_key(self):
        if self.curve != TPM_ECC_NIST_P256:
            raise WireError("only NIST P-256 is supported")
        return ec.EllipticCurvePublicNumbers(int.from_bytes(self.x, "big"), int.from_bytes(self.y, "big"),
                                             ec.SECP256R1()).public_key()


def _read_sym_def_object(r):
    alg = r.u16()
    if alg == TPM_ALG_NULL:
        return
    if alg == TPM_ALG_XOR:
        r.u16()  # hash
        return
    r.u16()  # keyBits
    r.u16()  # mode


def _read_scheme_with_hash(r, ecdaa=TPM_ALG_ECDAA):
    scheme = r.u16()
    if scheme == TPM_ALG_NULL:
        return scheme
    r.u16()  # hashAlg
    if scheme == ecdaa:
        r.u16()  # count
    return scheme


def _ecc_params_curve(params):
    r = Reader(params)
    _read_sym_def_object(r)
    _read_scheme_with_hash(r)
    curve = r.u16()
    _read_scheme_with_hash(r)  # kdf
    r.done()
    return curve


def read_public(r):
    """TPMT_PUBLIC from a Reader."""
    type_ = r.u16()
    name_alg = r.u16()
    attributes = r.u32()
    auth_policy = r.tpm2b(64)
    start = r.pos
    if type_ == TPM_ALG_ECC:
        _read_sym_def_object(r)
        _read_scheme_with_hash(r)
        r.u16()
        _read_scheme_with_hash(r)
        params = r.data[start:r.pos]
        x = r.tpm2b(128)
        y = r.tpm2b(128)
        return Public(type_, name_alg, attributes, auth_policy, params, x, y)
    if type_ == TPM_ALG_RSA:
        _read_sym_def_object(r)
        _read_scheme_with_hash(r)
        r.u16()  # keyBits
        r.u32()  # exponent
        params = r.data[start:r.pos]
        ustart = r.pos
        r.tpm2b(512)
        return Public(type_, name_alg, attributes, auth_policy, params, unique_raw=r.data[ustart:r.pos])
    if type_ == TPM_ALG_KEYEDHASH:
        scheme = r.u16()
        if scheme == TPM_ALG_HMAC:
            r.u16()
        elif scheme == TPM_ALG_XOR:
            r.u16()
            r.u16()
        elif scheme != TPM_ALG_NULL:
            raise WireError("unknown keyedhash scheme 0x%04x" % scheme)
    elif type_ == TPM_ALG_SYMCIPHER:
        _read_sym_def_object(r)
    else:
        raise WireError("unknown public type 0x%04x" % type_)
    params = r.data[start:r.pos]
    ustart = r.pos
    r.tpm2b(64)
    return Public(type_, name_alg, attributes, auth_policy, params, unique_raw=r.data[ustart:r.pos])


def unmarshal_tpm2b_public(data):
    """TPM2B_PUBLIC, consuming data exactly."""
    r = Reader(data)
    pub = read_tpm2b_public(r)
    r.done()
    return pub


def read_tpm2b_public(r):
    size = r.u16()
    inner = Reader(r.take(size))
    pub = read_public(inner)
    inner.done()
    return pub


def marshal_tpm2b_public(pub):
    return tpm2b(pub.marshal())


def read_ecc_point(r):
    x = r.tpm2b(128)
    y = r.tpm2b(128)
    return x, y


def marshal_ecc_point(x, y):
    return tpm2b(x) + tpm2b(y)


def read_sym_def(r):
    """TPMT_SYM_DEF -> (alg, keyBits-or-hash, mode)."""
    alg = r.u16()
    if alg == TPM_ALG_NULL:
        return (alg, 0, 0)
    if alg == TPM_ALG_XOR:
        return (alg, r.u16(), 0)
    bits = r.u16()
    mode = r.u16()
    return (alg, bits, mode)


def marshal_sym_def(sym):
    alg, bits, mode = sym
    if alg == TPM_ALG_NULL:
        return u16(alg)
    if alg == TPM_ALG_XOR:
        return u16(alg) + u16(bits)
    return u16(alg) + u16(bits) + u16(mode)


# --- Command and response framing (Part 1 18, Part 2 10.5/10.6) ---------------

class AuthCommand:
    def __init__(self, handle, nonce, attrs, hmac):
        self.handle = handle
        self.nonce = nonce
        self.attrs = attrs
        self.hmac = hmac

    def marshal(self):
        return u32(self.handle) + tpm2b(self.nonce) + bytes([self.attrs]) + tpm2b(self.hmac)


class AuthResponse:
    def __init__(self, nonce, attrs, hmac):
        self.nonce = nonce
        self.attrs = attrs
        self.hmac = hmac

    def marshal(self):
        return tpm2b(self.nonce) + bytes([self.attrs]) + tpm2b(self.hmac)


def read_header(data):
    if len(data) < 10:
        raise WireError("short header")
    tag, size, code = struct.unpack(">HII", data[:10])
    return tag, size, code


class Command:
    """A parsed command. Commands whose code is unknown keep only the header."""

    def __init__(self, raw):
        self.raw = bytes(raw)
        self.tag, size, self.cc = read_header(self.raw)
        if size != len(self.raw):
            raise WireError("command size field %d != %d bytes" % (size, len(self.raw)))
        if self.tag not in (TPM_ST_SESSIONS, TPM_ST_NO_SESSIONS):
            raise WireError("bad command tag 0x%04x" % self.tag)
        self.known = self.cc in COMMANDS
        self.handles = []
        self.auths = []
        self.params = b""
        if not self.known:
            return
        _, nh, self.n_auth_handles, _ = COMMANDS[self.cc]
        r = Reader(self.raw, 10)
        self.handles = [r.u32() for _ in range(nh)]
        if self.tag == TPM_ST_SESSIONS:
            auth_size = r.u32()
            ar = Reader(r.take(auth_size))
            while ar.remaining():
                h = ar.u32()
                nonce = ar.tpm2b(64)
                attrs = ar.u8()
                mac = ar.tpm2b(128)
                self.auths.append(AuthCommand(h, nonce, attrs, mac))
            if not self.auths or len(self.auths) > 3:
                raise WireError("%d sessions in a command" % len(self.auths))
        self.params = r.take(r.remaining())

    @property
    def name(self):
        return cc_name(self.cc)

    def marshal(self):
        if not self.known:
            return self.raw
        body = b"".join(u32(h) for h in self.handles)
        if self.auths:
            area = b"".join(a.marshal() for a in self.auths)
            body += u32(len(area)) + area
            tag = TPM_ST_SESSIONS
        else:
            tag = TPM_ST_NO_SESSIONS
        body += self.params
        return u16(tag) + u32(10 + len(body)) + u32(self.cc) + body


class Response:
    """A parsed response to a command with code cc."""

    def __init__(self, raw, cc, n_sessions):
        self.raw = bytes(raw)
        self.cc = cc
        self.tag, size, self.rc = read_header(self.raw)
        if size != len(self.raw):
            raise WireError("response size field %d != %d bytes" % (size, len(self.raw)))
        self.handles = []
        self.params = b""
        self.auths = []
        self.parsed = False
        if self.rc != TPM_RC_SUCCESS or cc not in COMMANDS:
            return
        r = Reader(self.raw, 10)
        self.handles = [r.u32() for _ in range(COMMANDS[cc][3])]
        if self.tag == TPM_ST_SESSIONS:
            psize = r.u32()
            self.params = r.take(psize)
            while r.remaining():
                nonce = r.tpm2b(64)
                attrs = r.u8()
                mac = r.tpm2b(128)
                self.auths.append(AuthResponse(nonce, attrs, mac))
            if len(self.auths) != n_sessions:
                raise WireError("response has %d sessions, command had %d" % (len(self.auths), n_sessions))
        elif self.tag == TPM_ST_NO_SESSIONS:
            self.params = r.take(r.remaining())
        else:
            raise WireError("bad response tag 0x%04x" % self.tag)
        self.parsed = True

    def marshal(self):
        if not self.parsed:
            return self.raw
        body = b"".join(u32(h) for h in self.handles)
        if self.tag == TPM_ST_SESSIONS:
            body += u32(len(self.params)) + self.params + b"".join(a.marshal() for a in self.auths)
        else:
            body += self.params
        return u16(self.tag) + u32(10 + len(body)) + u32(self.rc) + body


def error_response(rc):
    return u16(TPM_ST_NO_SESSIONS) + u32(10) + u32(rc)


def build_command(cc, handles=(), params=b""):
    """A command with no sessions (for commands the proxy injects itself)."""
    body = b"".join(u32(h) for h in handles) + params
    return u16(TPM_ST_NO_SESSIONS) + u32(10 + len(body)) + u32(cc) + body


# --- Part 1 11.4.10: key derivation ---------------------------------------------

def _label(label):
    if isinstance(label, str):
        label = label.encode()
    return label if label.endswith(b"\0") else label + b"\0"


def kdfa(hash_alg, key, label, context_u, context_v, bits):
    """KDFa: SP 800-108 counter-mode HMAC KDF as the TPM uses it."""
    hn = hash_name(hash_alg)
    out = b""
    i = 1
    lab = _label(label)
    while len(out) * 8 < bits:
        out += _hmac.new(key, u32(i) + lab + context_u + context_v + u32(bits), hn).digest()
        i += 1
    out = out[:(bits + 7) // 8]
    if bits % 8:
        out = bytes([out[0] & ((1 << (bits % 8)) - 1)]) + out[1:]
    return out


def kdfe(hash_alg, z, label, party_u, party_v, bits):
    """KDFe: SP 800-56A concatenation KDF as the TPM uses it."""
    out = b""
    i = 1
    lab = _label(label)
    while len(out) * 8 < bits:
        out += H(hash_alg, u32(i), z, lab, party_u, party_v)
        i += 1
    return out[:(bits + 7) // 8]


# --- Part 1 C.6.1: ECC salt --------------------------------------------------------

def _coord(value):
    return value.to_bytes(32, "big")


def ecc_salt_decrypt(private_key, key_public, encrypted_salt):
    """The salt a caller shared with key_public (a Public whose private part is
    private_key) by the ephemeral point marshalled in encrypted_salt (the
    contents of a TPM2B_ENCRYPTED_SECRET)."""
    r = Reader(encrypted_salt)
    ex, ey = read_ecc_point(r)
    r.done()
    eph = ec.EllipticCurvePublicNumbers(int.from_bytes(ex, "big"), int.from_bytes(ey, "big"),
                                        ec.SECP256R1()).public_key()
    z = private_key.exchange(ec.ECDH(), eph)
    bits = digest_size(key_public.name_alg) * 8
    return kdfe(key_public.name_alg, z, "SECRET", ex, key_public.x, bits)


def ecc_salt_encrypt(key_public, private_ephemeral=None):
    """A fresh salt for key_public: returns (salt, encrypted_salt)."""
    eph = private_ephemeral or ec.generate_private_key(ec.SECP256R1())
    nums = eph.public_key().public_numbers()
    ex, ey = _coord(nums.x), _coord(nums.y)
    z = eph.exchange(ec.ECDH(), key_public.ec_public_key())
    bits = digest_size(key_public.name_alg) * 8
    return kdfe(key_public.name_alg, z, "SECRET", ex, key_public.x, bits), marshal_ecc_point(ex, ey)


def session_key(auth_hash, bind_auth, salt, nonce_tpm, nonce_caller):
    """Part 1 19.6.8: empty for an unbound, unsalted session."""
    if not bind_auth and not salt:
        return b""
    return kdfa(auth_hash, bind_auth + salt, "ATH", nonce_tpm, nonce_caller, digest_size(auth_hash) * 8)


def strip_auth(auth):
    """Trailing zero octets of an authValue are not used in HMAC keys (Part 1 19.6.4.3)."""
    return auth.rstrip(b"\0")


# --- Part 1 21: parameter encryption --------------------------------------------------

def cfb_crypt(hash_alg, session_value, nonce_newer, nonce_older, key_bits, data, encrypt):
    kiv = kdfa(hash_alg, session_value, "CFB", nonce_newer, nonce_older, key_bits + 128)
    key, iv = kiv[:key_bits // 8], kiv[key_bits // 8:]
    c = Cipher(algorithms.AES(key), modes.CFB(iv))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def xor_crypt(hash_alg, session_value, nonce_newer, nonce_older, data):
    mask = kdfa(hash_alg, session_value, "XOR", nonce_newer, nonce_older, len(data) * 8)
    return bytes(a ^ b for a, b in zip(data, mask))


def param_crypt(sym, auth_hash, session_value, nonce_newer, nonce_older, data, encrypt):
    alg, bits, mode = sym
    if alg == TPM_ALG_AES and mode == TPM_ALG_CFB:
        return cfb_crypt(auth_hash, session_value, nonce_newer, nonce_older, bits, data, encrypt)
    if alg == TPM_ALG_XOR:
        return xor_crypt(bits, session_value, nonce_newer, nonce_older, data)
    raise WireError("unsupported parameter encryption 0x%04x/0x%04x" % (alg, mode))


def split_first_tpm2b(params):
    """(contents, rest) of a parameter area whose first parameter is a TPM2B."""
    r = Reader(params)
    first = r.tpm2b()
    return first, r.data[r.pos:]


# --- Part 1 19.6: HMAC ---------------------------------------------------------------

def cp_hash(hash_alg, cc, names, params):
    return H(hash_alg, u32(cc), *names, params)


def rp_hash(hash_alg, rc, cc, params):
    return H(hash_alg, u32(rc), u32(cc), params)


def session_hmac(hash_alg, key, p_hash, nonce_newer, nonce_older, extra_nonces, attrs):
    return _hmac.new(key, p_hash + nonce_newer + nonce_older + extra_nonces + bytes([attrs]),
                     hash_name(hash_alg)).digest()


def handle_is_name_itself(handle):
    """Handles whose name is the handle (Part 1 16): PCRs, sessions, permanent handles."""
    return (handle >> 24) in (0x00, 0x02, 0x03, 0x40)
