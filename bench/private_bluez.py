'''A private system bus with the fake BlueZ on it, for the benchmarks (the
Swift tests have their own harness in BlueZTestSupport). Debian's python3.

    with PrivateBlueZ() as bluez:
        bluez.control('AddBird', ...)
        subprocess.run([...], env=bluez.env)
'''

import os
import signal
import subprocess
import tempfile

import dbus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'fixtures')
CONTROL = 'org.birdctl.FakeBlueZ'


class PrivateBlueZ:
    def __init__(self, adapters=1):
        self.adapters = adapters
        self.daemon = self.fake = None

    def __enter__(self):
        self.daemon = subprocess.Popen(
            ['dbus-daemon', '--config-file', os.path.join(FIXTURES, 'test-bus.conf'), '--nofork', '--print-address'],
            stdout=subprocess.PIPE, text=True)
        self.address = self.daemon.stdout.readline().strip()
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address, NO_COLOR='1', PYTHONDONTWRITEBYTECODE='1')
        self.log = tempfile.NamedTemporaryFile(prefix='fake-bluez-', suffix='.log', delete=False)
        self.fake = subprocess.Popen(
            ['/usr/bin/python3', '-m', 'dbusmock', '--system', '-t', os.path.join(FIXTURES, 'fake_bluez.py'),
             '-p', '{"adapters": %d}' % self.adapters, '-l', self.log.name],
            stdout=subprocess.PIPE, text=True, env=self.env)
        if self.fake.stdout.readline().strip() != 'ready':
            raise RuntimeError('the fake BlueZ did not start: ' + open(self.log.name).read())
        self.bus = dbus.bus.BusConnection(self.address)
        self.proxy = self.bus.get_object('org.bluez', '/')
        return self

    def control(self, method, *args, timeout=600):
        return self.proxy.get_dbus_method(method, CONTROL)(*args, timeout=timeout)

    def __exit__(self, *exc):
        for process in (self.fake, self.daemon):
            if process and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        os.unlink(self.log.name)
