'''The arm64 birdctl (make release-arm64) under qemu-aarch64-static, against
the fake BlueZ on a private bus (bench/private_bluez.py): it scans a Bird,
reads and decodes its values, and says what it says on amd64 when there is
no bluetoothd. A check of the cross-built binary's libdbus, Swift runtime
and decoding on this machine (user-mode emulation: no arm64 kernel, no
bluetoothd).

    arm64-check.py BIRDCTL SYSROOT'''

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'bench'))
import dbus  # noqa: E402
from private_bluez import PrivateBlueZ  # noqa: E402

ADDRESS = 'F0:0D:B1:7D:00:64'


def main(birdctl, sysroot):
    qemu = ['qemu-aarch64-static', '-L', sysroot, birdctl]
    with PrivateBlueZ(pinned=False) as bluez:
        bluez.control('AddBird', ADDRESS, 'Robin', dbus.ByteArray(b'#FF8800'), dbus.ByteArray(b'Robin'),
                      dbus.ByteArray(b'80'), dbus.Int16(-48), False, True)
        scan = subprocess.run(qemu + ['scan', '--json', '--timeout', '3'], env=bluez.env,
                              capture_output=True, text=True, timeout=60)
        found = [json.loads(line) for line in scan.stdout.splitlines() if '"found"' in line]
        assert scan.returncode == 0 and [f['address'] for f in found] == [ADDRESS], \
            f'scan: exit {scan.returncode}, {scan.stdout!r} {scan.stderr!r}'
        read = subprocess.run(qemu + ['read', ADDRESS, '--json'], env=bluez.env,
                              capture_output=True, text=True, timeout=60)
        value = json.loads(read.stdout) if read.returncode == 0 else {}
        assert (value.get('name'), value.get('color'), value.get('alpha')) == ('Robin', '#FF8800', 0.8), \
            f'read: exit {read.returncode}, {read.stdout!r} {read.stderr!r}'
    gone = subprocess.run(qemu + ['scan', '--timeout', '1'], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS='unix:path=/nonexistent'))
    assert gone.returncode == 3 and 'cannot connect to the system bus' in gone.stderr, \
        f'no bus: exit {gone.returncode}, {gone.stderr!r}'
    print(f'arm64-check: under qemu-aarch64-static the arm64 birdctl scanned {ADDRESS} '
          f'(RSSI {found[0].get("rssi")}), read {value["name"]} {value["color"]} {value["alpha"]}, '
          f'and exited 3 without a bus')


if __name__ == '__main__':
    main(*sys.argv[1:])
