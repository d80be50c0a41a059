#!/usr/bin/python3
"""record_proxy.py -- forward TCP connections and record every byte.

  record_proxy.py LISTEN_PORT TARGET_PORT FILE OWNER_PID [LISTEN_ADDR]

Listens on 127.0.0.1:LISTEN_PORT (or LISTEN_ADDR, another loopback
address: test/t/ops/124_tls_faults.pl reaches ZooKeeper at an address its
certificate does not name), forwards each connection to
127.0.0.1:TARGET_PORT, and appends every byte that crosses, in either
direction, to FILE (test/t/ops/113_tls.pl: what a network sees of zklock's
traffic).  Prints "ready" once listening.  Exits when process OWNER_PID is
gone (checked every half second), or after 600 s.  Standard library only.
"""
import os
import selectors
import socket
import sys
import time


def main():
    listen_port, target_port, path, owner = (int(sys.argv[1]), int(sys.argv[2]),
                                            sys.argv[3], int(sys.argv[4]))
    listen_addr = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
    out = open(path, "ab", buffering=0)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((listen_addr, listen_port))
    srv.listen(16)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, None)
    print("ready", flush=True)
    peer = {}
    end = time.time() + 600
    while time.time() < end:
        try:
            os.kill(owner, 0)
        except OSError:
            break
        for key, _ in sel.select(0.5):
            s = key.fileobj
            if s is srv:
                c, _ = srv.accept()
                t = socket.create_connection(("127.0.0.1", target_port))
                for a, b in ((c, t), (t, c)):
                    a.setblocking(False)
                    peer[a] = b
                    sel.register(a, selectors.EVENT_READ, None)
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                for x in (s, peer.get(s)):
                    if x is not None and x in peer:
                        sel.unregister(x)
                        x.close()
                        del peer[x]
                continue
            out.write(data)
            peer[s].setblocking(True)
            peer[s].sendall(data)
            peer[s].setblocking(False)


main()
