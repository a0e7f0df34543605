'''Instructions per notification, counted by callgrind, for birdctl and the
floor both ways (signals and AcquireNotify's socket).

CPU seconds in a burst move with the shared machine: how fast the fake
emits, how the two vCPUs are shared, how many notifications one wake-up
finds queued (a client that keeps up wakes more often and pays more system
calls per notification). On 2026-11-24 the same binaries gave birdctl 1.19×
the floor in `make bench` and 0.82–1.05× in a harness run beside it. The
instructions a client executes per notification do not depend on any of
that: this counts them (user space only) as the difference between a watch
of SMALL and of LARGE notifications, divided by LARGE − SMALL, so start-up
falls out.

The AcquireNotify pair is counted paced too (2,000 a second, a wake-up per
notification when the client keeps up): the difference from its burst is
what each wake-up of the loop costs. Not the signal path: under valgrind a
client there cannot keep up with 2,000 a second (some 40,000 instructions
each, run ~50 times slower), and several per wake-up would be counted as one.
'''

import os
import shlex
import subprocess
import tempfile
import time

import dbus

SMALL, LARGE = 100, 2_100


def total_instructions(command, bluez, address, uuid, characteristic_path, count, method):
    '''Instructions callgrind counted for `command` while `count` notifications
    arrive. `command`: an argument list, or a list of them for a pipeline
    (`a | b`), each stage counted and the sum returned.'''
    stages = command if isinstance(command[0], list) else [command]
    with tempfile.TemporaryDirectory(prefix='bench-callgrind-') as scratch:
        counted = [['valgrind', '--tool=callgrind', f'--callgrind-out-file={scratch}/{index}.out', *stage]
                   for index, stage in enumerate(stages)]
        process = subprocess.Popen(['/bin/sh', '-c', ' | '.join(shlex.join(stage) for stage in counted)],
                                   env=bluez.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        characteristic = bluez.bus.get_object('org.bluez', characteristic_path)
        deadline = time.monotonic() + 120  # start-up under valgrind is slow
        subscribed = False
        while not subscribed and time.monotonic() < deadline and process.poll() is None:
            try:
                subscribed = any(characteristic.Get('org.bluez.GattCharacteristic1', name,
                                                    dbus_interface='org.freedesktop.DBus.Properties')
                                 for name in ('Notifying', 'NotifyAcquired'))
            except dbus.DBusException:
                pass
            time.sleep(0.1)
        if not subscribed:
            process.kill()
            raise RuntimeError(f'{stages[0][0]} did not subscribe: {process.communicate()[1].decode()[-300:]}')
        time.sleep(1)  # its initial read answered, under valgrind
        bluez.control(method, address, uuid, dbus.UInt32(count), dbus.UInt32(101))
        _, stderr = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f'{stages[-1][0]} exited {process.returncode}: {stderr.decode()[-300:]}')
        return sum(profile_total(f'{scratch}/{index}.out') for index in range(len(stages)))


def profile_total(path):
    '''The instructions a callgrind profile counted.'''
    with open(path) as profile:
        for line in profile:
            if line.startswith(('summary:', 'totals:')):
                return int(line.split()[1])
    raise RuntimeError(f'no totals in {path}')


def readable_copy(binary, directory):
    '''`binary` without its DWARF (valgrind 3.19 cannot read the DWARF 5
    swiftc writes and gives up on the whole file); symbols stay.'''
    copy = os.path.join(directory, os.path.basename(binary))
    subprocess.run(['strip', '--strip-debug', '-o', copy, binary], check=True)
    return copy


def per_notification(tool, private_bluez, add_bird, address, uuid, characteristic_path, method='Burst'):
    '''(instructions per notification, None) or (None, the error); `method`:
    the fake's Burst (as fast as it emits) or Pace (2,000 a second).'''
    totals = []
    try:
        for count in (SMALL, LARGE):
            with private_bluez() as bluez:
                add_bird(bluez)
                # + 1: the first line is the initial read, as in job_watch.
                totals.append(total_instructions(tool.watch(count + 1), bluez, address, uuid, characteristic_path,
                                                 count, method))
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return None, str(error)
    return (totals[1] - totals[0]) / (LARGE - SMALL), None
