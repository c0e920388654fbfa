"""Real redis-server processes for the remote-cache tests: each on a free loopback port of its own,
with or without a password, always stopped (the context manager kills it on any exit), plus a
minimal RESP client so the tests can read, corrupt, hold and wait for keys without a Python Redis
package, and a proxy that makes a server slow."""
import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time


def free_port(host='127.0.0.1'):
    with socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ipv6_loopback():
    """Why not: '' when ::1 can be bound here, else the reason (for a test's skip message)."""
    if not socket.has_ipv6:
        return 'Python was built without IPv6'
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(('::1', 0))
    except OSError as e:
        return f'cannot bind ::1 ({e})'
    return ''


class Resp:
    """One connection; command() sends bytes or str arguments and returns the decoded reply."""

    def __init__(self, port, password=None, timeout=5, host='127.0.0.1'):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b''
        if password:
            self.command('AUTH', password)

    def close(self):
        self.sock.close()

    def command(self, *args):
        out = b'*%d\r\n' % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b'$%d\r\n%s\r\n' % (len(a), a)
        self.sock.sendall(out)
        return self._reply()

    def next_reply(self):
        """The next reply the server sends unasked (a subscription's message)."""
        return self._reply()

    def _line(self):
        while b'\r\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('redis closed the connection')
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b'+':
            return rest.decode()
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f'unexpected reply {line!r}')


class RedisServer:
    def __init__(self, password=None, port=None, bind='127.0.0.1'):
        self.password = password
        self.bind = bind
        self.port = port or free_port(bind)
        self.dir = tempfile.mkdtemp(prefix='kiln-redis-')
        self.socket = os.path.join(self.dir, 'redis.sock')  # served too, for unix:// URLs
        self.proc = None

    @property
    def url(self):
        auth = f':{self.password}@' if self.password else ''
        host = f'[{self.bind}]' if ':' in self.bind else self.bind
        return f'redis://{auth}{host}:{self.port}'

    def start(self):
        """Starts redis-server and returns once it accepts connections: it says so on the
        NOTIFY_SOCKET datagram socket (systemd's protocol, --supervised systemd)."""
        exe = shutil.which('redis-server') or '/usr/bin/redis-server'
        args = [exe, '--port', str(self.port), '--bind', self.bind, '--save', '', '--appendonly', 'no',
                '--dir', self.dir, '--daemonize', 'no', '--loglevel', 'warning', '--unixsocket', self.socket,
                '--supervised', 'systemd']
        if self.password:
            args += ['--requirepass', self.password]
        notify_path = os.path.join(self.dir, f'notify-{self.port}')
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(notify_path)
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=dict(os.environ, NOTIFY_SOCKET=notify_path))
            # Why a pidfd beside the socket: a server that exits (port taken) is seen at once.
            exited = os.pidfd_open(self.proc.pid)
            try:
                deadline = time.monotonic() + 10
                while (left := deadline - time.monotonic()) > 0:
                    readable, _, _ = select.select([notify, exited], [], [], left)
                    if notify in readable and b'READY=1' in notify.recv(4096):
                        return self
                    if exited in readable:
                        raise RuntimeError(f'redis-server exited with {self.proc.wait()} on port {self.port}')
            finally:
                os.close(exited)
                os.unlink(notify_path)
        raise RuntimeError(f'redis-server did not say it was ready on port {self.port} within 10 s')

    def client(self):
        return Resp(self.port, self.password, host=self.bind)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def entries(self):
        client = self.client()
        try:
            return {k.decode(): client.command('GET', k) for k in client.command('KEYS', 'kiln:entry:*')}
        finally:
            client.close()

    def wait_for_key(self, pattern, timeout=60):
        """Blocks until a key matching `pattern` is written, on Redis's own keyspace events (no
        polling), at most `timeout` seconds; returns whether one was (at once if one exists)."""
        listener = Resp(self.port, self.password, timeout=timeout, host=self.bind)
        try:
            listener.command('CONFIG', 'SET', 'notify-keyspace-events', 'KA')
            listener.command('PSUBSCRIBE', f'__keyspace@0__:{pattern}')
            # Why after subscribing: a key written before the subscription sends no event.
            client = self.client()
            try:
                if client.command('KEYS', pattern):
                    return True
            finally:
                client.close()
            try:
                listener.next_reply()
                return True
            except socket.timeout:
                return False
        finally:
            listener.close()


@contextlib.contextmanager
def redis_server(password=None, bind='127.0.0.1'):
    server = RedisServer(password, bind=bind)
    try:
        yield server.start()
    finally:
        server.kill()
        shutil.rmtree(server.dir, ignore_errors=True)


class DelayingProxy:
    """Forwards to Redis but holds every reply for `delay` seconds: a server that is up but slow."""

    def __init__(self, port, delay):
        self.port, self.delay = port, delay
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(64)
        self.address = self.listener.getsockname()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(('127.0.0.1', self.port))
            threading.Thread(target=self.pipe, args=(client, upstream, 0), daemon=True).start()
            threading.Thread(target=self.pipe, args=(upstream, client, self.delay), daemon=True).start()

    @staticmethod
    def pipe(source, sink, delay):
        try:
            while data := source.recv(65536):
                time.sleep(delay)  # the slowness under test, not a wait for something
                sink.sendall(data)
        except OSError:
            pass
