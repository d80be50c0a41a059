#!/usr/bin/python3
"""zk_proxy.py -- a TCP proxy the chaos tests own, that can partition.

Forwards TCP connections on 127.0.0.1 for named links (LISTEN port ->
TARGET port) and, when told, partitions a link: every byte that arrives
on either side is read and thrown away, while both sockets stay open (a
partition, not a reset: no FIN and no RST crosses it, the peers only see
silence).  A connection made while the link is cut is accepted and held
open without reaching the target (as if its bytes were lost).  Healing
the link forwards new connections again; a connection that lost bytes to
the partition has a broken stream, so heal closes it (both ends, now) --
or, with "heal NAME keep", leaves it swallowing until an end closes it.

Usage:
  zk_proxy.py --control PORT --link NAME=LISTEN:TARGET [--link ...]
              [--await-target S] [--owner-pid PID] [--max-seconds N]
              [--log FILE]

A connection whose target refuses is closed at once (the client sees its
connection end), unless --await-target S: it is then held, what the client
sends is queued, and the target is tried again every 0.1 s for S seconds
(closed after that).  A proxy cannot refuse a connection it has accepted;
holding it is how a slow network looks, where closing it would look like a
peer that hung up.  (A ZooKeeper learner may connect to its new leader's
quorum port before the leader listens on it: refused, it tries again --
in 3.8 up to 5 times, 100 ms apart; hung up on, it goes back to the
election.  Held, it waits for the leader's answer up to initLimit x
tickTime, its read timeout, so an S beyond that changes nothing; an S
beyond half a second is more patient than ZooKeeper itself.)  A held
connection has lost nothing: heal leaves it held.  Cut while held, it is
from then on one made during the cut (never forwarded; heal closes it).

Control: connect to 127.0.0.1:PORT, send one line, read the answer (which
ends with a line "ok" or "error: ..."), the proxy closes the connection:
  cut NAME|all            swallow bytes from now on (both directions)
  heal NAME|all [keep]    forward again (see above)
  flap NAME|all           handshakes only: close every connection, then on
                          each new one forward the client's first frame
                          (ZooKeeper's connect request) and the server's
                          first frame (its answer), throw away what else
                          the client sends, and close the connection 0.2 s
                          after the answer (as a server that refuses what
                          follows the handshake); "heal" ends it
  status                  one line per link: name, ports, state, counters
  quit                    exit

Bounded: the proxy exits when process PID (--owner-pid) is gone (checked
twice a second), after --max-seconds (default 900), on SIGTERM/SIGINT, or
on "quit".  Standard library only.
"""

import argparse
import errno
import math
import os
import selectors
import signal
import socket
import sys
import time

HOST = '127.0.0.1'
BUFMAX = 1 << 20      # stop reading a side while this much waits for the other


def log(msg):
    sys.stderr.write('%s zk_proxy[%d]: %s\n' % (
        time.strftime('%H:%M:%S', time.localtime()) +
        ('%.3f' % (time.time() % 1))[1:], os.getpid(), msg))
    sys.stderr.flush()


class Pipe:
    """One accepted connection and (unless made during a cut) its upstream."""

    def __init__(self, link, csock, usock):
        self.link = link
        self.sock = {'c': csock, 'u': usock}    # None once closed
        self.buf = {'c': bytearray(), 'u': bytearray()}   # bytes TO that side
        self.tainted = usock is None            # lost bytes to a partition
        self.seen = {'c': 0, 'u': 0}            # bytes read from each side
        self.first = {'c': None, 'u': None}     # first frame's length
        self.head = {'c': bytearray(), 'u': bytearray()}  # its length field
        self.close_at = None                    # flap: when to close
        self.await_until = None                 # target refused: retry until
        self.id = link.next_id
        link.next_id += 1

    def other(self, side):
        return 'u' if side == 'c' else 'c'


class Link:
    def __init__(self, name, listen, target):
        self.name = name
        self.listen = listen
        self.target = target
        self.cut = False
        self.flap = False
        self.pipes = []
        self.next_id = 1
        self.fwd = 0          # bytes forwarded
        self.swallowed = 0    # bytes thrown away
        self.accepted = 0
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((HOST, listen))
        self.lsock.listen(64)
        self.lsock.setblocking(False)


class Proxy:
    def __init__(self, args):
        self.sel = selectors.DefaultSelector()
        self.links = {}
        for spec in args.link:
            try:
                name, ports = spec.split('=', 1)
                lp, tp = ports.split(':', 1)
                link = Link(name, int(lp), int(tp))
            except (ValueError, OSError) as e:
                sys.exit('zk_proxy.py: bad or unusable --link %r: %s' % (spec, e))
            if name in self.links or name == 'all':
                sys.exit('zk_proxy.py: link name %r used twice or reserved' % name)
            self.links[name] = link
            self.sel.register(link.lsock, selectors.EVENT_READ, ('accept', link))
        self.ctl = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ctl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ctl.bind((HOST, args.control))
        self.ctl.listen(16)
        self.ctl.setblocking(False)
        self.sel.register(self.ctl, selectors.EVENT_READ, ('control', None))
        self.await_target = args.await_target
        self.next_retry = 0
        self.owner = args.owner_pid
        self.deadline = time.monotonic() + args.max_seconds
        self.running = True

    # -- sockets ---------------------------------------------------------

    def _events(self, pipe, side):
        """What to wait for on one side of a pipe."""
        ev = 0
        other = pipe.other(side)
        # read unless the other side's queue is full (back-pressure)
        if len(pipe.buf[other]) < BUFMAX:
            ev |= selectors.EVENT_READ
        if pipe.buf[side]:
            ev |= selectors.EVENT_WRITE
        return ev

    def _update(self, pipe):
        for side in ('c', 'u'):
            s = pipe.sock[side]
            if s is None:
                continue
            ev = self._events(pipe, side)
            try:
                key = self.sel.get_key(s)
                if ev == 0:
                    self.sel.unregister(s)
                elif key.events != ev:
                    self.sel.modify(s, ev, ('pipe', (pipe, side)))
            except KeyError:
                if ev:
                    self.sel.register(s, ev, ('pipe', (pipe, side)))

    def _close_side(self, pipe, side):
        s = pipe.sock[side]
        if s is None:
            return
        try:
            self.sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()
        pipe.sock[side] = None
        pipe.buf[side] = bytearray()
        if pipe.sock['c'] is None and pipe.sock['u'] is None:
            pipe.link.pipes.remove(pipe)

    def _close(self, pipe, why):
        log('%s#%d: closed (%s)' % (pipe.link.name, pipe.id, why))
        self._close_side(pipe, 'c')
        self._close_side(pipe, 'u')

    def accept(self, link):
        try:
            csock, _ = link.lsock.accept()
        except OSError:
            return
        csock.setblocking(False)
        csock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link.accepted += 1
        if link.cut:
            pipe = Pipe(link, csock, None)
            link.pipes.append(pipe)
            log('%s#%d: accepted during the cut: held, not forwarded'
                % (link.name, pipe.id))
        else:
            try:
                usock = self._connect(link)
            except OSError as e:
                if self.await_target <= 0:
                    log('%s: cannot reach target %d: %s' % (link.name, link.target, e))
                    csock.close()
                    return
                pipe = Pipe(link, csock, None)
                pipe.tainted = False
                pipe.await_until = time.monotonic() + self.await_target
                link.pipes.append(pipe)
                log('%s#%d: target %d refused (%s): waiting for target'
                    % (link.name, pipe.id, link.target, e))
            else:
                pipe = Pipe(link, csock, usock)
                link.pipes.append(pipe)
        self._update(pipe)

    @staticmethod
    def _connect(link):
        usock = socket.create_connection((HOST, link.target), timeout=3)
        usock.setblocking(False)
        usock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return usock

    def retry_targets(self):
        """--await-target: try the targets of held connections again."""
        now = time.monotonic()
        if now < self.next_retry:
            return
        self.next_retry = now + 0.1
        for link in self.links.values():
            for pipe in list(link.pipes):
                if pipe.await_until is None:
                    continue    # (cut ends every wait at once)
                try:
                    pipe.sock['u'] = self._connect(link)
                except OSError as e:
                    if now >= pipe.await_until:
                        self._close(pipe, 'target %d still refuses: %s'
                                    % (link.target, e))
                    continue
                pipe.await_until = None
                log('%s#%d: target reached, %d byte(s) queued' % (
                    link.name, pipe.id, len(pipe.buf['u'])))
                self._update(pipe)

    def io(self, pipe, side, mask):
        link = pipe.link
        s = pipe.sock[side]
        if s is None:
            return
        other = pipe.other(side)
        if mask & selectors.EVENT_READ:
            try:
                data = s.recv(65536)
            except BlockingIOError:
                data = None
            except OSError as e:
                data = b''
                log('%s#%d: %s side: %s' % (link.name, pipe.id, side, e))
            if data == b'':
                if link.cut:
                    # the close does not cross the partition either
                    log('%s#%d: %s side closed during the cut'
                        % (link.name, pipe.id, side))
                    self._close_side(pipe, side)
                    return
                # forwarding: pass on what is queued for the other side,
                # then close both
                o = pipe.sock[other]
                if o is not None and pipe.buf[other]:
                    try:
                        o.setblocking(True)
                        o.settimeout(2)
                        o.sendall(pipe.buf[other])
                    except OSError:
                        pass
                self._close(pipe, '%s side closed' % side)
                return
            if data and link.flap:
                data = self._flap_filter(pipe, side, data)
            if data:
                if link.cut or (pipe.sock[other] is None and
                                pipe.await_until is None):
                    link.swallowed += len(data)
                    pipe.tainted = True
                else:
                    pipe.buf[other] += data
        if mask & selectors.EVENT_WRITE and pipe.buf[side]:
            try:
                n = s.send(pipe.buf[side])
                link.fwd += n
                del pipe.buf[side][:n]
            except BlockingIOError:
                pass
            except OSError as e:
                self._close(pipe, '%s side: %s' % (side, e))
                return
        self._update(pipe)

    def _flap_filter(self, pipe, side, data):
        """Flap mode: what of data read from side may pass (its first
        frame); arms the close once the server's first frame has passed."""
        start = pipe.seen[side]
        pipe.seen[side] += len(data)
        if pipe.first[side] is None:
            pipe.head[side] += data[:max(0, 4 - start)]
            if len(pipe.head[side]) == 4:
                pipe.first[side] = 4 + int.from_bytes(pipe.head[side], 'big')
        limit = pipe.first[side] or 4
        keep = data[:max(0, limit - start)]
        pipe.link.swallowed += len(data) - len(keep)
        if len(keep) < len(data):
            # the stream lost bytes: heal must close it, not let its
            # client read replies it cannot match
            pipe.tainted = True
        if side == 'u' and pipe.first['u'] is not None and \
                pipe.seen['u'] >= pipe.first['u'] and pipe.close_at is None:
            pipe.close_at = time.monotonic() + 0.2
        return keep

    def close_flapped(self):
        now = time.monotonic()
        for link in self.links.values():
            for pipe in list(link.pipes):
                if pipe.close_at is not None and now >= pipe.close_at:
                    self._close(pipe, 'flap: closed after the handshake')

    # -- control ---------------------------------------------------------

    def _targets(self, name):
        if name == 'all':
            return list(self.links.values())
        if name in self.links:
            return [self.links[name]]
        raise ValueError('no link %r' % name)

    def command(self, line):
        words = line.split()
        if not words:
            raise ValueError('empty command')
        cmd = words[0]
        if cmd == 'cut' and len(words) == 2:
            for link in self._targets(words[1]):
                link.cut = True
                for pipe in link.pipes:
                    if pipe.await_until is not None:
                        # held for its target: from now on as if made
                        # during the cut (at once: a heal that follows
                        # must not find it still waiting)
                        pipe.await_until = None
                        pipe.tainted = True
                    for side in ('c', 'u'):
                        if pipe.buf[side]:
                            link.swallowed += len(pipe.buf[side])
                            pipe.buf[side] = bytearray()
                            pipe.tainted = True
                    self._update(pipe)
                log('%s: cut (%d connection(s) open)' % (link.name, len(link.pipes)))
            return []
        if cmd == 'heal' and len(words) in (2, 3) and \
                (len(words) == 2 or words[2] == 'keep'):
            keep = len(words) == 3
            for link in self._targets(words[1]):
                link.cut = False
                link.flap = False
                for pipe in link.pipes:
                    pipe.close_at = None
                closed = 0
                for pipe in list(link.pipes):
                    if pipe.await_until is not None and not pipe.tainted:
                        continue    # waiting for its target: lost nothing
                    if pipe.tainted or pipe.sock['c'] is None or pipe.sock['u'] is None:
                        if keep:
                            # broken: swallowing until an end closes it,
                            # never forwarded once its target listens
                            pipe.await_until = None
                            continue
                        self._close(pipe, 'healed: its stream lost bytes')
                        closed += 1
                log('%s: healed; %d broken connection(s) %s' % (
                    link.name, closed if not keep else
                    sum(1 for p in link.pipes if p.tainted),
                    'left open, swallowing' if keep else 'closed'))
            return []
        if cmd == 'flap' and len(words) == 2:
            for link in self._targets(words[1]):
                link.flap = True
                for pipe in list(link.pipes):
                    self._close(pipe, 'flap: every connection closed')
                log('%s: flapping' % link.name)
            return []
        if cmd == 'status' and len(words) == 1:
            return ['%s listen=%d target=%d state=%s conns=%d broken=%d '
                    'accepted=%d forwarded=%d swallowed=%d' % (
                        l.name, l.listen, l.target,
                        'cut' if l.cut else 'flap' if l.flap else 'forward',
                        len(l.pipes), sum(1 for p in l.pipes if p.tainted),
                        l.accepted, l.fwd, l.swallowed)
                    for l in self.links.values()]
        if cmd == 'quit' and len(words) == 1:
            self.running = False
            return []
        raise ValueError('unknown command %r' % line.strip())

    def control(self):
        try:
            c, _ = self.ctl.accept()
        except OSError:
            return
        # one short line, read with a bound; the proxy stalls at most 2 s
        c.settimeout(2)
        data = b''
        try:
            while b'\n' not in data and len(data) < 1024:
                chunk = c.recv(1024)
                if not chunk:
                    break
                data += chunk
            line = data.decode('ascii', 'replace').split('\n')[0]
            try:
                out = self.command(line) + ['ok']
            except ValueError as e:
                out = ['error: %s' % e]
            log('control: %s -> %s' % (line.strip(), out[-1]))
            c.sendall(('\n'.join(out) + '\n').encode())
        except OSError as e:
            log('control connection: %s' % e)
        finally:
            c.close()

    # -- main loop -------------------------------------------------------

    def owner_alive(self):
        if not self.owner:
            return True
        try:
            os.kill(self.owner, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def run(self):
        log('serving: control %d; %s' % (
            self.ctl.getsockname()[1],
            ', '.join('%s %d->%d' % (l.name, l.listen, l.target)
                      for l in self.links.values())))
        next_check = 0
        while self.running:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 0.5
                if not self.owner_alive():
                    log('owner %d is gone: exiting' % self.owner)
                    break
                if now >= self.deadline:
                    log('--max-seconds reached: exiting')
                    break
            self.close_flapped()
            self.retry_targets()
            for key, mask in self.sel.select(timeout=0.05):
                kind, what = key.data
                if kind == 'accept':
                    self.accept(what)
                elif kind == 'control':
                    self.control()
                else:
                    self.io(what[0], what[1], mask)
        for link in self.links.values():
            for pipe in list(link.pipes):
                self._close(pipe, 'proxy exiting')
            link.lsock.close()
        self.ctl.close()


def seconds(text):
    """A bound in seconds: finite and not negative (nan or inf would hold a
    connection for the proxy's whole life)."""
    v = float(text)
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError('want finite seconds >= 0, not %r' % text)
    return v


def main():
    ap = argparse.ArgumentParser(description='partitioning TCP proxy for tests')
    ap.add_argument('--control', type=int, required=True)
    ap.add_argument('--link', action='append', default=[], required=True)
    ap.add_argument('--await-target', type=seconds, default=0)
    ap.add_argument('--owner-pid', type=int, default=0)
    ap.add_argument('--max-seconds', type=float, default=900)
    ap.add_argument('--log')
    args = ap.parse_args()
    if args.log:
        fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    proxy = Proxy(args)

    def stop(signum, frame):
        proxy.running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    proxy.run()
    log('exited')


if __name__ == '__main__':
    main()
