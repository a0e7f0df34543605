'''A private system bus with the fake BlueZ on it, for the benchmarks (the
Swift tests have their own harness in FakeBlueZSupport). Debian's python3.

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


def producer_cpu():
    '''`taskset` arguments that keep the bus and the fake on one CPU, the
    first this process may use, when it may use two or more (else none).

    The fake BlueZ and dbus-daemon are the benchmarks' load generator. Free
    to run on any CPU of this 2-vCPU machine, they shared both with the
    client under test, and who ran when decided how many notifications a
    client's wake-up found waiting: the same binary woke 13 to 33 times per
    100 notifications within one run, its kernel time went with it, and a
    burst's CPU ratio to the floor swung 0.89-1.36x between runs whose
    instructions per notification were the same. Kept to one CPU, they
    leave the other to the client, the same for every client; the clients
    themselves stay free to run anywhere.'''
    cpus = sorted(os.sched_getaffinity(0))
    return ['taskset', '--cpu-list', str(cpus[0])] if len(cpus) >= 2 else []


class PrivateBlueZ:
    def __init__(self, adapters=1, pinned=True):
        '''`pinned`: the bus and the fake on one CPU (see producer_cpu).'''
        self.adapters, self.pinned = adapters, pinned
        self.daemon = self.fake = None

    def __enter__(self):
        pinned = producer_cpu() if self.pinned else []
        self.daemon = subprocess.Popen(
            [*pinned, 'dbus-daemon', '--config-file', os.path.join(FIXTURES, 'test-bus.conf'), '--nofork', '--print-address'],
            stdout=subprocess.PIPE, text=True)
        self.address = self.daemon.stdout.readline().strip()
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address, NO_COLOR='1', PYTHONDONTWRITEBYTECODE='1')
        self.log = tempfile.NamedTemporaryFile(prefix='fake-bluez-', suffix='.log', delete=False)
        self.fake = subprocess.Popen(
            [*pinned, '/usr/bin/python3', '-m', 'dbusmock', '--system', '-t', os.path.join(FIXTURES, 'fake_bluez.py'),
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
