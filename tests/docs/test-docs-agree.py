#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The documentation agrees with the code's own tables (issue 34).

The code is asked, never re-implemented:
  - the commands and each command's options: 'tpmguard help' and
    'tpmguard COMMAND --help' (printed from the command and option tables);
  - the defaults: 'tpmguard config get KEY' under an empty configuration
    (lib/config.c's defaults).
The documentation checked: README.md, docs/hardware.md, debian/README.Debian,
the man pages (tpmguard(8), tpmguard.conf(5), tpmguard-token(7)) and the
shipped data/tpmguard.conf.in:
  - every example command ('tpmguard VERB ...' in a code block, an .EX block
    or inline code) names a command that exists and only options that command
    lists;
  - every documented default ('Default: X' in tpmguard.conf(5), '#key = X'
    in the shipped configuration, 'key = X  # the default', '(`key`, default
    X)', 'the default `key = X`', 'default the `key` setting: X' in the
    Markdown) is the code's.
TAP on standard output.
"""
import os
import re
import subprocess
import sys
import tempfile

TPMGUARD = os.environ["TPMGUARD"]
SRC = os.environ["TPMGUARD_SRC"]
n = 0
failed = 0


def result(ok, what):
    global n, failed
    n += 1
    if not ok:
        failed += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))


def run(*args, env=None):
    return subprocess.run([TPMGUARD, *args], capture_output=True, text=True, env=env)


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read()


# ---- the code's tables ----
help_text = run("help").stdout
commands = [l.split()[0] for l in help_text.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines() if l.strip()]
options = {}
for c in commands:
    h = run(c, "--help").stdout
    options[c] = set(re.findall(r"^\s+(?:-\w )?(--[\w-]+)", h, re.M)) | set(re.findall(r"^\s+(-\w) --", h, re.M))

workdir = tempfile.mkdtemp()
os.chmod(workdir, 0o700)
empty = os.path.join(workdir, "empty.conf")
open(empty, "w").close()
env = dict(os.environ, TPMGUARD_CONFIG=empty)
defaults = {}


def default_of(key):
    if key not in defaults:
        p = run("config", "get", key, env=env)
        defaults[key] = p.stdout.strip() if p.returncode == 0 else None
    return defaults[key]


# ---- example commands ----
DOCS_MD = ["README.md", "docs/hardware.md", "debian/README.Debian"]
DOCS_MAN = ["docs/man/tpmguard.8", "docs/man/tpmguard.conf.5", "docs/man/tpmguard-token.7"]


def example_lines(rel):
    text = read(rel)
    lines = []
    if rel.endswith(".8") or rel.endswith(".5") or rel.endswith(".7"):
        for m in re.finditer(r"\n\.EX\n(.*?)\n\.EE", text, re.S):
            lines += m.group(1).replace("\\-", "-").replace("\\e", "\\").splitlines()
    else:
        for m in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S):
            lines += m.group(1).splitlines()
        lines += re.findall(r"`(tpmguard [^`\n]+)`", text)
        if not rel.endswith(".md"):
            # README.Debian is plain text: its commands are the indented lines
            lines += [l for l in text.splitlines() if l.startswith("  ") and l.strip().startswith("tpmguard ")]
    found = []
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        for part in re.split(r"\||;|&&|\$\(", line):
            part = part.strip()
            part = re.sub(r"^(sudo|\$|#)\s+", "", part)
            if part.startswith("tpmguard ") and not part.startswith("tpmguard-"):
                found.append(part)
    return found


checked = 0
for rel in DOCS_MD + DOCS_MAN:
    if not os.path.exists(os.path.join(SRC, rel)):
        continue
    for example in example_lines(rel):
        words = example.split()
        verb = next((w for w in words[1:] if not w.startswith("-")), None)
        if verb is None or verb in ("COMMAND", "...") or verb.isupper():
            continue
        checked += 1
        if verb not in commands:
            result(False, "%s: '%s': no command \"%s\" (tpmguard help)" % (rel, example, verb))
            continue
        bad = [w.split("=", 1)[0] for w in words[1:]
               if w.startswith("-") and w != "-" and w.split("=", 1)[0] not in options[verb]]
        result(not bad, "%s: '%s'%s" % (rel, example, ": %s not listed by '%s --help'" % (", ".join(bad), verb)
                                        if bad else ""))
result(checked >= 20, "%d example commands found in the documentation" % checked)

# ---- documented defaults ----
claims = []  # (where, key, value)

conf5 = read("docs/man/tpmguard.conf.5")
for block in conf5.split("\n.TP\n")[1:]:
    lines = block.splitlines()
    # the item's head: its first line and each line after a .TQ
    heads = [lines[0]] + [lines[i + 1] for i in range(len(lines) - 1) if lines[i] == ".TQ"]
    keys = [m.group(1) for m in (re.match(r'^\.B[IR]? "?([a-z_]+) = ', h) for h in heads) if m]
    m = re.search(r"Defaults?:\n(.*?)(?:\n\.TP|\Z)", block, re.S)
    if not keys or not m:
        continue
    values = re.findall(r"^\.BR? (\S+?)[,.]?(?: |$)", m.group(1), re.M)
    values = [v.strip('"').replace("\\-", "-") for v in values]
    for key, value in zip(keys, values):
        claims.append(("tpmguard.conf(5)", key, value))

for line in read("data/tpmguard.conf.in").splitlines():
    m = re.match(r"^#([a-z_]+) = (\S.*)$", line)
    if m and "@" not in m.group(2):
        claims.append(("data/tpmguard.conf.in", m.group(1), m.group(2).strip()))

for rel in ["README.md", "docs/hardware.md"]:
    text = read(rel)
    flat = re.sub(r"\s+", " ", text)
    for m in re.finditer(r"^([a-z_]+) = (\S+)\s+# the default", text, re.M):
        claims.append((rel, m.group(1), m.group(2)))
    for m in re.finditer(r"\(`([a-z_]+)`, default (\S+?)\)", flat):
        claims.append((rel, m.group(1), m.group(2)))
    for m in re.finditer(r"the default `([a-z_]+) = (\S+?)`", flat):
        claims.append((rel, m.group(1), m.group(2)))
    for m in re.finditer(r"default the `([a-z_]+)` setting: (\w+)", flat):
        claims.append((rel, m.group(1), m.group(2)))

# Not literal in the code: ek_ca's default depends on the build's prefix
# (/usr, /usr/local), null_name_path's on the TPM device tcti names.
DERIVED = {"ek_ca", "null_name_path"}
for where, key, value in claims:
    if key in DERIVED:
        continue
    code = default_of(key)
    result(code == value, "%s: %s defaults to %s%s" % (where, key, value,
                                                       "" if code == value else " (the code says %s)" % code))
result(len(claims) >= 15, "%d documented defaults found" % len(claims))

print("1..%d" % n)
sys.exit(1 if failed else 0)
