'''The fleet's part of `make bench` (issue 38 part 5): what `watch --all`
costs as the birds grow, on the fake BlueZ.

1. CPU per notification with 1, 8 and 32 birds streaming: the same pace in
   all three (notifications sent to the birds in turn, PACE a second in all),
   so that only the number of birds changes. The three watches run side by
   side on buses of their own and are measured in turn, round by round, so
   a drift of the shared machine falls on all alike. CPU is the watch's own
   (the sum of its threads' schedstat run time) over the notifications, not
   its start. Goal: flat, the 32 birds' ≤ 1.1× the one bird's. Beside it,
   instructions per notification with 1 and 32 birds (callgrind), which
   the machine's load does not move.
2. Ten birds through a controller that holds three links (the fake's
   SetMaxLinks, which Linux 6.1's silence imitates: a Connect past it is
   never answered): two held (--hold), eight polled every POLL_INTERVAL s
   (--policy polled); Disconnect is answered after 2 s, as bluetoothd
   does, so polled links overlap and the limit is learned on the way. Over a measured stretch after
   every bird was read once: each polled bird's reading age (the time from
   one reading to the next, and to the end), its maximum and 95th
   percentile against the bound docs/scheduling.md promises
   (--poll-interval + ⌈polled ÷ free links⌉ × --connect-timeout), and
   connects per minute against the most there can be: the polls due
   (polled birds × 60 ÷ interval) or, if fewer, what the free links carry
   (one poll at a time each, held until its Disconnect is answered).

Alone (birdctl's release build and bench/measure):

    /usr/bin/python3 bench/fleet_bench.py BIRDCTL MEASURE [--quick]
'''

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import dbus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instructions  # noqa: E402

ALPHA = 'b7ac06dc-09ff-40ed-b03a-55d09b080003'
BIRD_COUNTS = (1, 8, 32)
PACE = 1_000               # notifications a second, all birds together
POLL_INTERVAL = 5          # s, the polled birds of part 2
CONNECT_TIMEOUT = 10       # s, birdctl's default
DISCONNECT_HOLD = 2        # s, as bluetoothd 5.66 holds a Disconnect
LINKS, HELD, BIRDS = 3, 2, 10
SMALL, LARGE, CALLGRIND_PACE = 200, 2_200, 200  # instructions: the watches counted, and their pace


def address(n):
    return 'F0:0D:B1:7D:%02X:%02X' % (1 + n // 256, n % 256)


def alpha_path(a):
    return '/org/bluez/hci0/dev_' + a.replace(':', '_') + '/service000a/char000f'


def add_birds(bluez, count):
    for n in range(count):
        bluez.control('AddBird', address(n), f'Bird{n}', dbus.ByteArray(b'#FF8800'), dbus.ByteArray(b'Bird'),
                      dbus.ByteArray(b'50'), dbus.Int16(-40 - n % 40), True, True)


def cpu_ns(pid):
    '''The process's CPU time so far, in ns (its threads' schedstat: exact, not in clock ticks).'''
    total = 0
    for task in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{task}/schedstat') as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that just ended
    return total


def notifying(bluez, addresses):
    count = 0
    for a in addresses:
        try:
            if bluez.bus.get_object('org.bluez', alpha_path(a)).Get(
                    'org.bluez.GattCharacteristic1', 'Notifying', dbus_interface='org.freedesktop.DBus.Properties'):
                count += 1
        except dbus.DBusException:
            pass
    return count


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def streaming_cost(birdctl, run_class, private_bluez, quick, say):
    '''{birds: [(CPU µs per notification, wake-ups per 100), …]} and the problems met.'''
    count = 2_000 if quick else 6_000
    rounds = 1 if quick else 5
    results = {n: [] for n in BIRD_COUNTS}
    problems = []
    watches = {}
    try:
        for n in BIRD_COUNTS:
            bluez = private_bluez().__enter__()
            add_birds(bluez, n)
            run = run_class([birdctl, 'watch', '--all', 'alpha'], bluez.env)
            watches[n] = (bluez, run)
        for n, (bluez, run) in watches.items():
            addresses = [address(i) for i in range(n)]
            say(f'fleet: {n} birds connecting and subscribing')
            if not wait_until(lambda: run.lines >= n and notifying(bluez, addresses) == n, 60 + n):
                problems.append(f'{n} birds: {notifying(bluez, addresses)} subscribed; '
                                f'{run.stderr.decode(errors="replace")[-200:]}')
        for round_number in range(rounds):
            for n, (bluez, run) in watches.items():
                if any(p.startswith(f'{n} birds') for p in problems):
                    continue
                say(f'fleet: {n} birds, {count:,} notifications at {PACE:,} a second (round {round_number + 1})')
                lines, before, slept = run.lines, cpu_ns(run.pid), run.sleeps_so_far()
                bluez.control('PaceBirds', [address(i) for i in range(n)], ALPHA, dbus.UInt32(count),
                              dbus.UInt32(PACE))
                if not run.wait_for_lines(lines + count, timeout=count / PACE * 3 + 30):
                    problems.append(f'{n} birds: {run.lines - lines} of {count} lines')
                    continue
                results[n].append(((cpu_ns(run.pid) - before) / count / 1000, (run.sleeps_so_far() - slept) / count * 100))
    finally:
        for bluez, run in watches.values():
            run.finish(5, kill=True)
            bluez.__exit__(None, None, None)
    return results, problems


def instructions_per_notification(birdctl, private_bluez, n):
    '''User-space instructions per notification with `n` birds (callgrind):
    the difference between watches of SMALL and LARGE notifications paced
    at CALLGRIND_PACE a second among the birds (a wake-up each under
    valgrind too), so start-up falls out; unlike CPU, no load moves it.'''
    totals = []
    for count in (SMALL, LARGE):
        with private_bluez() as bluez, tempfile.TemporaryDirectory(prefix='bench-callgrind-') as scratch:
            add_birds(bluez, n)
            out = os.path.join(scratch, 'callgrind.out')
            process = subprocess.Popen(['valgrind', '--tool=callgrind', f'--callgrind-out-file={out}', birdctl, 'watch',
                                        '--all', 'alpha', '--count', str(n + count)], env=bluez.env,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            lines = [0]

            def read():
                for _ in process.stdout:
                    lines[0] += 1
            threading.Thread(target=read, daemon=True).start()
            addresses = [address(i) for i in range(n)]
            if not wait_until(lambda: lines[0] >= n and notifying(bluez, addresses) == n, 300):
                process.kill()
                return None
            time.sleep(1)  # its initial reads answered, under valgrind
            bluez.control('PaceBirds', addresses, ALPHA, dbus.UInt32(count), dbus.UInt32(CALLGRIND_PACE))
            try:
                process.wait(count / CALLGRIND_PACE * 5 + 60)
            except subprocess.TimeoutExpired:
                process.kill()
                return None
            with open(out) as counted:
                totals.append(next(int(l.split()[1]) for l in counted if l.startswith(('summary:', 'totals:'))))
    return (totals[1] - totals[0]) / (LARGE - SMALL)


class Readings:
    '''A watch's JSON lines, each with the time it was read.'''

    def __init__(self, run):
        self.run = run
        self.events = []  # (monotonic time, event)

    def take(self):
        for line in self.run.new_lines():
            try:
                self.events.append((line[0], json.loads(line[1])))
            except ValueError:
                pass
        return self.events


def link_limited(birdctl, run_class, private_bluez, quick, say):
    '''Reading ages and connects of the polled birds (see the module's text).'''
    seconds = 30 if quick else 60
    addresses = [address(n) for n in range(BIRDS)]
    held, polled = addresses[:HELD], addresses[HELD:]
    with private_bluez() as bluez:
        add_birds(bluez, BIRDS)
        bluez.control('SetMaxLinks', dbus.UInt32(LINKS))
        # bluetoothd holds a Disconnect for 2 s, and the link counts until it is down.
        bluez.control('DelayAlways', 'Disconnect', dbus.Double(DISCONNECT_HOLD))
        run = run_class([birdctl, 'watch', '--all', 'alpha', '--json', '--hold', ','.join(held), '--policy', 'polled',
                         '--poll-interval', str(POLL_INTERVAL), '--connect-timeout', str(CONNECT_TIMEOUT)],
                        bluez.env, keep_lines=True)
        readings = Readings(run)

        def read_once():
            heard = {e['address'] for _, e in readings.take() if e.get('event') == 'reading'}
            return heard >= set(addresses)
        say(f'fleet: {BIRDS} birds, {LINKS} links: until each is read once (the limit is learned on the way)')
        ready = wait_until(read_once, 120)
        started = time.monotonic()
        say(f'fleet: {BIRDS} birds, {LINKS} links: {seconds} s of polling')
        time.sleep(seconds)
        ended = time.monotonic()
        events = readings.take()
        most, past = (int(v) for v in bluez.control('Links'))
        run.finish(5, kill=True)
    stretch = [(t, e) for t, e in events if started <= t <= ended]
    ages = []
    for bird in polled:
        times = [started] + [t for t, e in stretch if e.get('event') == 'reading' and e.get('address') == bird] + [ended]
        # From the stretch's start to the first reading is not a whole age: left out unless nothing came.
        gaps = [b - a for a, b in zip(times[1:], times[2:])] or [ended - started]
        ages += gaps
    connects = sum(1 for _, e in stretch if e.get('event') == 'connected')
    limit = next((e for _, e in events if e.get('event') == 'links'), {})
    free = max(1, LINKS - HELD)
    bound = POLL_INTERVAL + math.ceil(len(polled) / free) * CONNECT_TIMEOUT
    return {'ok': ready and bool(ages), 'ages': ages, 'bound': bound, 'connects_per_minute': connects / ((ended - started) / 60),
            'due_per_minute': len(polled) * 60 / POLL_INTERVAL,
            # One poll at a time per free link, each holding it until its Disconnect is answered.
            'carried_per_minute': free * 60 / DISCONNECT_HOLD, 'most_links': most, 'past_limit': past,
            'limit': limit.get('limit'), 'seconds': ended - started,
            'error': '' if ready else run.stderr.decode(errors='replace')[-300:]}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def run(birdctl, run_class, private_bluez, quick, say):
    '''(table lines, RATIO lines).'''
    cost, problems = streaming_cost(birdctl, run_class, private_bluez, quick, say)
    counted = {}
    with tempfile.TemporaryDirectory(prefix='bench-fleet-') as scratch:
        readable = instructions.readable_copy(birdctl, scratch)
        for n in (1, 32):
            say(f'fleet: {n} birds, instructions per notification (callgrind, watches of {SMALL:,} and {LARGE:,})')
            counted[n] = instructions_per_notification(readable, private_bluez, n)
    limited = link_limited(birdctl, run_class, private_bluez, quick, say)
    lines = ['', f'`watch --all` as the birds grow: CPU per notification with 1, 8 and 32 birds streaming alpha, '
             f'{PACE:,} notifications a second among them in turn (the watch\'s own CPU over the notifications, '
             'schedstat; medians (min–max) of the rounds).', '',
             '| birds | CPU µs per notification | × one bird\'s | wake-ups per 100 notifications |', '|---|---|---|---|']
    cpu = {n: [c for c, _ in cost[n]] for n in BIRD_COUNTS}
    one = statistics.median(cpu[1]) if cpu[1] else None
    for n in BIRD_COUNTS:
        values = cpu[n]
        if not values:
            lines.append(f'| {n} | failed | – | – |')
            continue
        median = statistics.median(values)
        spread = f'{median:.1f} ({min(values):.1f}–{max(values):.1f})' if len(values) > 1 else f'{median:.1f}'
        wakeups = statistics.median(w for _, w in cost[n])
        lines.append(f'| {n} | {spread} | {f"{median / one:.2f}×" if one else "–"} | {wakeups:.0f} |')
    if counted[1] and counted[32]:
        lines += ['', f'Instructions per notification (callgrind, user space; watches of {SMALL:,} and {LARGE:,} '
                  f'notifications paced at {CALLGRIND_PACE} a second among the birds, the difference): one bird '
                  f'{counted[1]:,.0f}, 32 birds {counted[32]:,.0f} ({counted[32] / counted[1]:.2f}×).']
    else:
        lines.append(f'⚠ instructions per notification: a callgrind run failed ({counted})')
    if one and cpu[32]:
        flat = statistics.median(cpu[32]) / one
        lines += ['', f'Target: CPU per notification with 32 birds ≤ 1.1× one bird\'s: {flat:.2f}× — '
                  f'{"met" if flat <= 1.1 else "MISSED"}']
    lines += [f'⚠ {p}' for p in problems]
    ratios = []
    if one:
        for n in BIRD_COUNTS[1:]:
            if cpu[n]:
                ratios.append(f'RATIO fleet-cpu-per-notification {n}-birds/1-bird {statistics.median(cpu[n]) / one:.2f}')
    if counted[1] and counted[32]:
        ratios.append(f'RATIO fleet-instructions-per-notification 32-birds/1-bird {counted[32] / counted[1]:.2f}')
    lines += ['', f'{BIRDS} birds through {LINKS} links (the fake refuses more, unannounced): {HELD} held, '
              f'{BIRDS - HELD} polled every {POLL_INTERVAL} s, connect deadline {CONNECT_TIMEOUT} s, Disconnect answered '
              f'after {DISCONNECT_HOLD} s as bluetoothd does; '
              f'{limited["seconds"]:.0f} s measured after every bird was read once.', '']
    if limited['ok']:
        ages = limited['ages']
        top, p95, bound = max(ages), percentile(ages, 0.95), limited['bound']
        most = min(limited['due_per_minute'], limited['carried_per_minute'])
        lines += ['| polled birds\' reading age: max s | p95 s | median s | the bound s | connects per minute '
                  '| polls due per minute | what the free link carries per minute | most links up '
                  '| Connects past the limit | limit learned |',
                  '|---|---|---|---|---|---|---|---|---|---|',
                  f'| {top:.1f} | {p95:.1f} | {statistics.median(ages):.1f} | {bound} | '
                  f'{limited["connects_per_minute"]:.0f} | {limited["due_per_minute"]:.0f} | '
                  f'{limited["carried_per_minute"]:.0f} | {limited["most_links"]} | '
                  f'{limited["past_limit"]} | {limited["limit"] or "– (never reached)"} |']
        ratios += [f'RATIO fleet-reading-age-max measured/bound {top / bound:.2f}',
                   f'RATIO fleet-reading-age-p95 measured/bound {p95 / bound:.2f}',
                   # No storm: at most the polls due, or what the free links carry if less.
                   f'RATIO fleet-connects-per-minute measured/most-possible {limited["connects_per_minute"] / most:.2f}']
    else:
        lines.append(f'⚠ failed: {limited["error"].strip()[-200:]}')
    return lines, ratios


if __name__ == '__main__':
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from private_bluez import PrivateBlueZ  # noqa: E402
    import run as bench  # noqa: E402
    bench.Run.measure = sys.argv[2]
    table, figures = run(sys.argv[1], bench.Run, PrivateBlueZ, '--quick' in sys.argv,
                         lambda *parts: print(*parts, file=sys.stderr, flush=True))
    print('\n'.join(table + [''] + figures))
