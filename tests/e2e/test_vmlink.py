#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests tests/e2e/vmlink without qemu: a stand-in "qemu" client and a
stand-in swtpm (control and data servers) on unix sockets.

Checks: control requests whose payload arrives in a second write (as qemu
writes them) reach swtpm whole, each on a connection of its own (so the
channel is free between requests); CMD_SET_DATAFD is answered by vmlink and
the handed-over descriptor is relayed to the data socket both ways."""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VMLINK = os.path.join(HERE, "vmlink")

CMD_GET_CAPABILITY, CMD_SET_LOCALITY, CMD_SET_DATAFD = 1, 5, 16
PAYLOAD = {CMD_GET_CAPABILITY: 0, CMD_SET_LOCALITY: 4}


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError("short read: %r" % buf)
        buf += d
    return buf


class FakeSwtpm:
    def __init__(self, d):
        self.ctrl_path = os.path.join(d, "tpm.sock.ctrl")
        self.data_path = os.path.join(d, "tpm.sock")
        self.requests = []          # (connection number, cmd, payload)
        self.connections = 0
        self.ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ctrl.bind(self.ctrl_path)
        self.ctrl.listen(4)
        self.data = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.data.bind(self.data_path)
        self.data.listen(4)
        threading.Thread(target=self.serve_ctrl, daemon=True).start()
        threading.Thread(target=self.serve_data, daemon=True).start()

    def serve_ctrl(self):
        while True:
            c, _ = self.ctrl.accept()
            self.connections += 1
            n = self.connections
            with c:
                try:
                    while True:
                        cmd = struct.unpack(">I", recv_exact(c, 4))[0]
                        payload = recv_exact(c, PAYLOAD[cmd])
                        self.requests.append((n, cmd, payload))
                        if cmd == CMD_GET_CAPABILITY:
                            c.sendall(struct.pack(">II", 0, 0x1234))
                        else:
                            c.sendall(struct.pack(">I", 0))
                except EOFError:
                    pass

    def serve_data(self):
        c, _ = self.data.accept()
        with c:
            while True:
                d = c.recv(4096)
                if not d:
                    return
                c.sendall(d[::-1])


def fail(msg):
    print("not ok - %s" % msg)
    sys.exit(1)


def main():
    d = tempfile.mkdtemp(prefix="vmlink-test.")
    tpm = FakeSwtpm(d)
    listen = os.path.join(d, "vm.ctrl")
    p = subprocess.Popen([VMLINK, "--listen", listen, "--data", tpm.data_path, "--ctrl", tpm.ctrl_path])
    try:
        for _ in range(200):
            if os.path.exists(listen):
                break
            time.sleep(0.02)
        qemu = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        qemu.settimeout(10)
        qemu.connect(listen)

        qemu.sendall(struct.pack(">I", CMD_GET_CAPABILITY))
        if struct.unpack(">II", recv_exact(qemu, 8)) != (0, 0x1234):
            fail("GET_CAPABILITY reply not relayed")

        # code and payload in two writes, as qemu's tpm_emulator does
        qemu.sendall(struct.pack(">I", CMD_SET_LOCALITY))
        time.sleep(0.2)
        qemu.sendall(bytes([3, 0, 0, 0]))
        if recv_exact(qemu, 4) != b"\0\0\0\0":
            fail("SET_LOCALITY reply not relayed")
        time.sleep(0.1)
        if tpm.requests != [(1, CMD_GET_CAPABILITY, b""), (2, CMD_SET_LOCALITY, bytes([3, 0, 0, 0]))]:
            fail("swtpm saw %r" % tpm.requests)

        a, b = socket.socketpair()
        socket.send_fds(qemu, [struct.pack(">I", CMD_SET_DATAFD)], [b.fileno()])
        b.close()
        if recv_exact(qemu, 4) != b"\0\0\0\0":
            fail("SET_DATAFD not answered")
        if len(tpm.requests) != 2:
            fail("SET_DATAFD was forwarded to swtpm")
        a.settimeout(10)
        a.sendall(b"\x80\x01tpm-command")
        if recv_exact(a, 13) != b"\x80\x01tpm-command"[::-1]:
            fail("data channel not relayed both ways")
        print("ok - vmlink: whole requests, a connection per request, data fd relayed")
        return 0
    finally:
        p.terminate()
        p.wait(10)


if __name__ == "__main__":
    sys.exit(main())
