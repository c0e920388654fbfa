"""Real redis-server processes for the remote-cache tests: each on a free loopback port of its own,
with or without a password, always stopped (the context manager kills it on any exit), plus a
minimal RESP client so the tests can read, corrupt and hold keys without a Python Redis package."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
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
        exe = shutil.which('redis-server') or '/usr/bin/redis-server'
        args = [exe, '--port', str(self.port), '--bind', self.bind, '--save', '', '--appendonly', 'no',
                '--dir', self.dir, '--daemonize', 'no', '--loglevel', 'warning', '--unixsocket', self.socket]
        if self.password:
            args += ['--requirepass', self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client = self.client()
                client.command('PING')
                client.close()
                return self
            except (OSError, ConnectionError, RuntimeError):
                if self.proc.poll() is not None:
                    raise RuntimeError(f'redis-server exited with {self.proc.returncode} on port {self.port}')
                time.sleep(0.02)
        raise RuntimeError(f'redis-server did not answer on port {self.port} within 10 s')

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


@contextlib.contextmanager
def redis_server(password=None, bind='127.0.0.1'):
    server = RedisServer(password, bind=bind)
    try:
        yield server.start()
    finally:
        server.kill()
        shutil.rmtree(server.dir, ignore_errors=True)
