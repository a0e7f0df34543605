'''bluetoothctl reading a characteristic, for the read figures of `make bench`:
the peer whose peak RSS is issue #13's mark for birdctl's read.

bluetoothctl has no one-shot read: it is driven as a person drives it, on a
pseudo-terminal (on a pipe its readline input does not wait for answers):
connect, select the attribute, read, disconnect, quit. bench/measure is its
parent, so its CPU and peak RSS are its own; its wall time is this dialogue's
pace, not its speed, and is not reported.
'''

import os
import re
import select
import subprocess
import tempfile
import time

ANSI = re.compile(rb'\x1b\[[0-9;?]*[A-Za-z]|\x01|\x02|\r')


class Shell:
    def __init__(self, measure, env):
        self.result = tempfile.NamedTemporaryFile(prefix='bench-bluetoothctl-', delete=False).name
        self.controller, terminal = os.openpty()
        self.process = subprocess.Popen([measure, self.result, 'bluetoothctl'], stdin=terminal, stdout=terminal,
                                        stderr=terminal, env=env, start_new_session=True)
        os.close(terminal)
        self.output = bytearray()
        self.dialogue = []

    def until(self, pattern, seconds):
        '''Reads until `pattern` is in what came since the last send (escapes removed).'''
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if re.search(pattern, ANSI.sub(b'', bytes(self.output))):
                return True
            ready, _, _ = select.select([self.controller], [], [], 0.05)
            if ready:
                try:
                    self.output += os.read(self.controller, 65536)
                except OSError:  # bluetoothctl has gone
                    return False
        return False

    def say(self, line, pattern, seconds=10):
        self.output.clear()
        os.write(self.controller, line.encode() + b'\r')
        came = self.until(pattern, seconds)
        self.dialogue.append(f'{"ok" if came else "MISS"} {line!r} awaiting {pattern!r}')
        return came

    def finish(self):
        '''Quits; returns (exit status, cpu s, peak RSS KiB).'''
        if self.process.poll() is None:
            try:
                os.write(self.controller, b'quit\r')
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        os.close(self.controller)
        with open(self.result) as result:
            fields = result.read().split()
        os.unlink(self.result)
        return int(fields[3]), float(fields[5]), int(fields[7])


def read(measure, env, address, path, value_hex):
    '''One read of the characteristic at `path` on `address`; a sample for
    the read job: cpu, rss, and ok when bluetoothctl printed `value_hex`.'''
    shell = Shell(measure, env)
    ok = (shell.until(rb'# ', 10)
          and shell.say(f'connect {address}', rb'Connection successful', 30)
          # The device's attributes arrive as InterfacesAdded after the
          # connection; select-attribute fails until bluetoothctl has them.
          and any(shell.say(f'gatt.select-attribute {path}', re.escape(path.rsplit('/', 2)[-2].encode()) + rb'/'
                            + re.escape(path.rsplit('/', 1)[-1].encode()) + rb'\]', 1) for _ in range(10))
          and shell.say('gatt.read', re.escape(value_hex.encode()) + rb' ')
          and shell.say(f'disconnect {address}', rb'Successful disconnected|Disconnection successful|Connected: no'))
    status, cpu, rss = shell.finish()
    return {'cpu': cpu, 'rss': rss, 'ok': ok and status == 0, 'status': status,
            'error': '' if ok else 'bluetoothctl: ' + '; '.join(shell.dialogue[-3:])}
