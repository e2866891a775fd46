# SPDX-License-Identifier: LGPL-2.1-or-later
"""
Response mutation for the interposer's mutate mode (issue 22: every byte from
the bus is hostile). One function, mutate(), turns one TPM response into a
hostile one, chosen deterministically by a seed:

  bitflip    1-4 random bits anywhere in the response
  truncate   cut at a random length (the header's size field fixed, or left)
  append     1-64 random bytes appended (size field fixed, or left)
  size       one size or count field set to 0, the value -1, +1 or its
             maximum (0xffff / 0xffffffff): the header's responseSize, the
             parameterSize of a response with sessions, the first parameter's
             leading u16/u32 (a TPM2B size or a TPML count), a random u16 or
             u32 in the parameters, or a session's nonce or HMAC size
  huge       every parameter-level size field of the response at its maximum
             at once (parameterSize, the first parameter's size), the
             deterministic runs: the forged parameterSize of issue 22
  huge-inner the first parameter's size alone at its maximum, parameterSize
             left intact (what huge's forged parameterSize would mask)
  rc         the response code replaced (body kept or dropped)
  tag        the tag replaced (sessions <-> no sessions, or random)

A mutation that leaves the header's size field larger than the bytes sent
asks the proxy to close the connection after sending (close_after), so that
the client's transport sees a short read rather than waiting forever: that
is what a bus gives when a response is cut, while a bus attacker who simply
stops answering is a denial of service nobody can prevent.

The result says what was done (a dict for the findings) and whether the
mutation touched the response's parameter area (params_touched): tests
require that a mutated parameter area of a security-relevant response never
lets the operation succeed.
"""

import random
import struct

import tpmwire as tw

KINDS = ("bitflip", "truncate", "append", "size", "huge", "huge-inner", "rc", "tag")
SIZE_VALUES = ("zero", "minus1", "plus1", "max")
RCS = (0x101, 0x922, 0x921, 0x98E, 0x9A2, 0x18B, 0x084, 0x000, 0xFFFFFFFF)
# Warnings after which ESAPI sends the same command again (tss2-esys resubmits on
# RETRY, YIELDED and TESTING): the genuine response to the resubmission may then
# make the operation succeed, and rightly so.
RESUBMITTED_RCS = (0x922, 0x908, 0x90A)


def _layout(raw, cc):
    """Offsets of the response's parts: (handles_end, param_start, param_end, fields).

    fields is a list of (name, offset, width) of size fields that exist in
    this response. Only what the bytes themselves say is used; a response that
    does not parse has the header size field only."""
    fields = [("responseSize", 2, 4)]
    if len(raw) < 10:
        return None, None, None, fields
    tag, _, rc = tw.read_header(raw)
    if rc != 0 or cc not in tw.COMMANDS:
        return None, None, None, fields
    hend = 10 + 4 * tw.COMMANDS[cc][3]
    if len(raw) < hend:
        return None, None, None, fields
    if tag == tw.TPM_ST_SESSIONS:
        if len(raw) < hend + 4:
            return hend, None, None, fields
        fields.append(("parameterSize", hend, 4))
        pstart = hend + 4
        pend = min(len(raw), pstart + struct.unpack(">I", raw[hend:hend + 4])[0])
        off = pend
        i = 0
        while off + 2 <= len(raw):  # the auth area: nonce, attrs, hmac per session
            fields.append(("session%d.nonce.size" % i, off, 2))
            off += 2 + struct.unpack(">H", raw[off:off + 2])[0] + 1
            if off + 2 > len(raw):
                break
            fields.append(("session%d.hmac.size" % i, off, 2))
            off += 2 + struct.unpack(">H", raw[off:off + 2])[0]
            i += 1
    else:
        pstart, pend = hend, len(raw)
    if pend - pstart >= 2:
        fields.append(("param0.u16", pstart, 2))
    if pend - pstart >= 4:
        fields.append(("param0.u32", pstart, 4))
    return hend, pstart, pend, fields


def _set_field(b, off, width, how, rng=None):
    fmt = ">H" if width == 2 else ">I"
    top = 0xFFFF if width == 2 else 0xFFFFFFFF
    old = struct.unpack(fmt, bytes(b[off:off + width]))[0]
    new = {"zero": 0, "minus1": (old - 1) & top, "plus1": (old + 1) & top, "max": top}[how]
    b[off:off + width] = struct.pack(fmt, new)
    return old, new


def _fix_size(b):
    b[2:6] = struct.pack(">I", len(b))


def mutate(raw, cc, rng, kind=None):
    """Returns (new_raw, description, close_after, params_touched)."""
    b = bytearray(raw)
    hend, pstart, pend, fields = _layout(raw, cc)
    kind = kind or rng.choice(KINDS)
    desc = {"kind": kind}
    close_after = False

    if kind == "bitflip":
        flips = []
        for _ in range(rng.randint(1, 4)):
            off = rng.randrange(len(b))
            bit = rng.randrange(8)
            b[off] ^= 1 << bit
            flips.append([off, bit])
        desc["flips"] = flips
    elif kind == "truncate":
        n = rng.randrange(len(b))
        del b[n:]
        desc["length"] = n
        if len(b) >= 6 and rng.random() < 0.5:
            _fix_size(b)
            desc["size_fixed"] = True
    elif kind == "append":
        extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        b += extra
        desc["appended"] = extra.hex()
        if rng.random() < 0.5:
            _fix_size(b)
            desc["size_fixed"] = True
    elif kind == "size":
        name, off, width = rng.choice(fields + ([("param.random", None, None)] if pstart is not None
                                                 and pend - pstart >= 4 else []))
        if off is None:
            width = rng.choice((2, 4))
            off = rng.randrange(pstart, pend - width + 1)
            name = "param+%d.u%d" % (off - pstart, 8 * width)
        how = rng.choice(SIZE_VALUES)
        old, new = _set_field(b, off, width, how)
        desc.update(field=name, offset=off, how=how, old=old, new=new)
    elif kind == "huge":
        changed = []
        for name, off, width in fields:
            if name in ("parameterSize", "param0.u16"):
                old, new = _set_field(b, off, width, "max")
                changed.append([name, old, new])
        desc["fields"] = changed
    elif kind == "huge-inner":
        changed = []
        for name, off, width in fields:
            if name == "param0.u16":
                old, new = _set_field(b, off, width, "max")
                changed.append([name, old, new])
        desc["fields"] = changed
    elif kind == "rc":
        rc = rng.choice(RCS)
        if rc == 0xFFFFFFFF:
            rc = rng.randrange(1 << 32)
        b[6:10] = struct.pack(">I", rc)
        if rng.random() < 0.5:
            del b[10:]
            _fix_size(b)
            desc["body_dropped"] = True
        desc["rc"] = "0x%08x" % rc
    elif kind == "tag":
        old = struct.unpack(">H", bytes(b[0:2]))[0]
        new = {tw.TPM_ST_SESSIONS: 0x8001, 0x8001: tw.TPM_ST_SESSIONS}.get(old, 0x8001)
        if rng.random() < 0.25:
            new = rng.randrange(1 << 16)
        b[0:2] = struct.pack(">H", new)
        desc.update(old="0x%04x" % old, new="0x%04x" % new)
    else:
        raise ValueError("unknown mutation kind %r" % kind)

    if len(b) >= 6 and struct.unpack(">I", bytes(b[2:6]))[0] > len(b):
        close_after = True
    elif len(b) < 10:
        close_after = True
    # What the TPM meant, changed? The tag, the response code, the parameterSize and the
    # parameters themselves (not the auth area: a password session's is empty, and what an
    # HMAC session's holds is checked by the HMAC anyway).
    if pstart is None:
        params_touched = bytes(b) != raw
    else:
        region = [(0, 2), (6, 10), (hend, pend)]
        params_touched = any(bytes(b[x:y]) != raw[x:y] for x, y in region)
    if kind == "rc" and desc.get("body_dropped") and int(desc["rc"], 16) in RESUBMITTED_RCS:
        desc["resubmitted"] = True
        params_touched = False
    desc["params_touched"] = params_touched
    return bytes(b), desc, close_after, params_touched


def rng_for(seed, generation_key=""):
    return random.Random("%s/%s" % (seed, generation_key))
