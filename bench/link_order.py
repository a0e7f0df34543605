#!/usr/bin/python3
'''`make link-order`: the functions birdctl runs when it starts, reads, scans
and watches, for the release link to put side by side; `make
link-order-check` (part of `make test`): fails when the committed list no
longer matches them.

    bench/link_order.py BIRDCTL OUTPUT          writes the list
    bench/link_order.py --check BIRDCTL LIST    checks LIST against BIRDCTL

The kernel maps a binary's pages around each one touched (fault-around, 64 KB
at a time), and peak RSS counts every page mapped. Left where the linker puts
them, the few hundred KB of code a `read` runs lie across most of the text,
and nearly all of it ended up mapped. lld places the sections of the
functions named in OUTPUT first (--symbol-ordering-file); names that no longer
exist are skipped, a function that is new is placed as before, so a stale list
costs memory, never correctness (docs/performance.md, 'What a read maps').

The functions are those callgrind sees run in the binary (against the fake
BlueZ on a private bus): `--version`, `read`, `scan`, and `watch` both ways
through a few notifications. Sorted by name, so the file's diff is readable.

The check traces the release binary the same way and fails, saying what to
run, when the list names more than GONE_TOLERANCE functions the binary no
longer has, or lacks more than MISSING_TOLERANCE functions the traced
commands ran. Traces of one binary could differ (how many notifications a
wake-up finds, which timer fires first); six of the release binary at
0f0386f, three of them beside a release build, gave the same 1,979 names.
The tolerances let a small change to the code these commands run land
without a new list in the same commit: each function left out is placed
with the cold code and may cost one more 64 KB window of a read's RSS, so
five at most. The list the check would write is left in FRESH, to commit
instead of running `make link-order` again.
'''

import os
import subprocess
import sys
import tempfile
import time

import dbus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from private_bluez import PrivateBlueZ  # noqa: E402
from run import ADDRESS, ALPHA, ALPHA_PATH, add_bird  # noqa: E402


def functions_run(binary, arguments, env, out_dir, while_running=None):
    '''Mangled names of the functions in `binary` that ran.'''
    out = os.path.join(out_dir, 'callgrind.out')
    process = subprocess.Popen(['valgrind', '--tool=callgrind', '--demangle=no', '--compress-strings=no',
                                '--compress-pos=no', '--dump-instr=no', f'--callgrind-out-file={out}', binary,
                                *arguments], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if while_running:
        while_running()
    _, stderr = process.communicate(timeout=120)
    if process.returncode != 0:
        sys.exit(f'link_order: birdctl {" ".join(arguments)} exited {process.returncode}:\n{stderr.decode()[-2000:]}')
    names, in_binary = set(), False
    with open(out) as profile:
        for line in profile:
            if line.startswith('ob='):
                in_binary = os.path.realpath(line[3:].strip()) == os.path.realpath(binary)
            elif line.startswith('fn=') and in_binary:
                names.add(line[3:].strip())
    os.unlink(out)
    return names


def unique_names(binary):
    '''Function names defined once in the binary. A name many objects define
    locally (`$sSnwst`, a value witness of Range; `objectdestroyTm`) would put
    every one of those objects' code first, the ones that did not run too.'''
    count = {}
    for line in subprocess.run(['nm', binary], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in 'tTwW':
            count[fields[2]] = count.get(fields[2], 0) + 1
    return {name for name, n in count.items() if n == 1}


def notify_when_subscribed(bluez):
    '''Once the watch is subscribed, five notifications.'''
    characteristic = bluez.bus.get_object('org.bluez', ALPHA_PATH)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if characteristic.Get('org.bluez.GattCharacteristic1', 'Notifying',
                                  dbus_interface='org.freedesktop.DBus.Properties'):
                time.sleep(1)  # the initial read, under valgrind
                bluez.control('Burst', ADDRESS, ALPHA, dbus.UInt32(5), dbus.UInt32(101))
                return
        except dbus.DBusException:
            pass
        time.sleep(0.1)
    sys.exit('link_order: the watch never subscribed')


def traced_functions(birdctl):
    '''The list for `birdctl`: the functions its traced commands run, each
    defined once in it, sorted.'''
    with tempfile.TemporaryDirectory() as scratch:
        # valgrind cannot read the release binary's DWARF 5; the names are in the symbol table.
        binary = os.path.join(scratch, 'birdctl')
        subprocess.run(['objcopy', '--strip-debug', birdctl, binary], check=True)
        names = functions_run(binary, ['--version'], os.environ, scratch)
        with PrivateBlueZ() as bluez:
            add_bird(bluez)
            names |= functions_run(binary, ['read', ADDRESS], bluez.env, scratch)
            names |= functions_run(binary, ['scan', '--timeout', '1'], bluez.env, scratch)
            for method in ('acquire', 'start'):
                names |= functions_run(binary, ['watch', ADDRESS, 'alpha', '--notify-method', method, '--count', '6'],
                                       bluez.env, scratch, lambda: notify_when_subscribed(bluez))
    return sorted(n for n in names & unique_names(birdctl) if ' ' not in n)


def defined_names(binary):
    '''Every function name the binary defines.'''
    lines = subprocess.run(['nm', binary], capture_output=True, text=True, check=True).stdout.splitlines()
    return {fields[2] for fields in map(str.split, lines) if len(fields) == 3 and fields[1] in 'tTwW'}


def write_list(names, output):
    with open(output, 'w') as out:
        out.write('\n'.join(names) + '\n')


# Six traces of one release binary differed by no name (docs/performance.md,
# 'The symbol order'); these allow small changes, each costing a read at most a 64 KB window.
GONE_TOLERANCE = 5
MISSING_TOLERANCE = 5
FRESH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '.build', 'link-order',
                     'symbol-order.txt')


def check(birdctl, listed_path):
    '''Exits non-zero, saying why and what to do, if the list at
    `listed_path` is stale for `birdctl`.'''
    with open(listed_path) as f:
        listed = {line.strip() for line in f if line.strip()}
    fresh = traced_functions(birdctl)
    os.makedirs(os.path.dirname(FRESH), exist_ok=True)
    write_list(fresh, FRESH)
    gone = sorted(listed - defined_names(birdctl))
    missing = sorted(set(fresh) - listed)
    idle = len(listed - set(fresh)) - len(gone)
    summary = (f'{len(listed)} names listed, {len(fresh)} traced; {len(gone)} listed names no longer in the '
               f'binary (tolerance {GONE_TOLERANCE}), {len(missing)} traced functions not listed (tolerance '
               f'{MISSING_TOLERANCE}), {idle} listed that did not run')
    if len(gone) <= GONE_TOLERANCE and len(missing) <= MISSING_TOLERANCE:
        print(f'link-order-check: {listed_path} is current: {summary}', file=sys.stderr)
        return
    examples = ''.join(f'\n  gone:    {name}' for name in gone[:5]) + \
        ''.join(f'\n  missing: {name}' for name in missing[:5])
    sys.exit(f'link-order-check: {listed_path} is stale for {birdctl}: {summary}.{examples}\n'
             f'The release link places less of the code birdctl runs together, and a read maps more. '
             f'Run `make link-order` and commit {listed_path} (or copy {os.path.relpath(FRESH)}, '
             f'the list traced just now, over it).')


def main():
    if sys.argv[1] == '--check':
        return check(*sys.argv[2:4])
    birdctl, output = sys.argv[1:3]
    names = traced_functions(birdctl)
    write_list(names, output)
    print(f'link_order: {len(names)} functions → {output}', file=sys.stderr)


if __name__ == '__main__':
    main()
