#!/usr/bin/python3
'''`make bench`: birdctl beside the floor (bench/floor.c) and the BLE tools
people use today, against the fake BlueZ on a private bus, in one run.

    bench/run.py BIRDCTL FLOOR MEASURE VENV_PYTHON OUTPUT [--quick]

Each job runs every tool several times; the table gives medians with
min–max and the ratio to the floor. CPU and peak RSS come from wait4(2) of
the tool's own process; a read's wall time from fork to exit (bench/measure),
a watch's from this process's monotonic clock to the last line read.
'''

import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import dbus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from private_bluez import PrivateBlueZ  # noqa: E402
import mqtt_bench  # noqa: E402
import scan_bench  # noqa: E402
import bluetoothctl_read  # noqa: E402
import fleet_bench  # noqa: E402
import instructions  # noqa: E402

ADDRESS = 'F0:0D:B1:7D:00:01'
ALPHA = 'b7ac06dc-09ff-40ed-b03a-55d09b080003'
ALPHA_PATH = '/org/bluez/hci0/dev_F0_0D_B1_7D_00_01/service000a/char000f'
BLUETOOTHCTL = 'bluetoothctl 5.66 (read only)'
PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'peers')


class Tool:
    def __init__(self, name, read, watch):
        self.name, self.read, self.watch = name, read, watch


def birdctl_watch(birdctl, *options):
    return lambda n: [birdctl, 'watch', ADDRESS, 'alpha', *options] + (['--count', str(n)] if n else [])


def tools(birdctl, floor, python):
    '''birdctl and the floor twice: notifications as signals through
    dbus-daemon (StartNotify, what bleak and simplepyble use) and through
    AcquireNotify's socket (birdctl's default where BlueZ offers it, and the
    fake does). The first two are "birdctl" and "the floor" of the ratios.'''
    return [
        Tool('birdctl', [birdctl, 'read', ADDRESS, 'alpha'], birdctl_watch(birdctl, '--notify-method', 'start')),
        Tool('floor (C, libdbus)', [floor, 'read', ADDRESS, ALPHA], lambda n: [floor, 'watch', ADDRESS, ALPHA, str(n)]),
        Tool('birdctl, AcquireNotify', [birdctl, 'read', ADDRESS, 'alpha'], birdctl_watch(birdctl)),
        Tool('floor, AcquireNotify', [floor, 'read', ADDRESS, ALPHA], lambda n: [floor, 'acquire', ADDRESS, ALPHA, str(n)]),
        Tool('bleak', [python, os.path.join(PEERS, 'bleak_client.py'), 'read', ADDRESS, ALPHA],
             lambda n: [python, os.path.join(PEERS, 'bleak_client.py'), 'watch', ADDRESS, ALPHA, str(n)]),
        Tool('simplepyble', [python, os.path.join(PEERS, 'simpleble_client.py'), 'read', ADDRESS, ALPHA],
             lambda n: [python, os.path.join(PEERS, 'simpleble_client.py'), 'watch', ADDRESS, ALPHA, str(n)]),
    ]


def add_bird(bluez):
    bluez.control('AddBird', ADDRESS, 'Robin', dbus.ByteArray(b'#FF8800'), dbus.ByteArray(b'Robin'),
                  dbus.ByteArray(b'80'), dbus.Int16(-50), True, True)


class Run:
    '''One tool process, started by bench/measure (which reports its CPU and
    peak RSS); its stdout lines counted on a thread.'''

    measure = None  # the measure binary, set by main

    def __init__(self, command, env, keep_lines=False):
        self.kept = [] if keep_lines else None  # (monotonic time, line) of each line, if asked for
        self.taken = 0
        self.result = tempfile.NamedTemporaryFile(prefix='bench-', delete=False).name
        self.process = subprocess.Popen([self.measure, self.result, *command], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.lines = 0
        self.last_line_at = None
        self.first_line = b''
        self.stderr = b''
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
        threading.Thread(target=lambda: setattr(self, 'stderr', self.process.stderr.read()), daemon=True).start()
        self.pid = None
        while self.pid is None:
            with open(self.result) as result:
                first = result.readline()
            if first.endswith('\n'):
                self.pid = int(first.split()[1])
            else:
                time.sleep(0.001)

    def read(self):
        for line in self.process.stdout:
            if not self.lines:
                self.first_line = line
            self.lines += 1
            self.last_line_at = time.monotonic()
            if self.kept is not None:
                self.kept.append((self.last_line_at, line))

    def new_lines(self):
        '''The lines kept since the last call (keep_lines).'''
        end = len(self.kept)
        taken, self.taken = self.kept[self.taken:end], end
        return taken

    def running(self):
        return self.process.poll() is None

    def wait_for_lines(self, count, timeout):
        deadline = time.monotonic() + timeout
        while self.lines < count and time.monotonic() < deadline and self.running():
            time.sleep(0.01)
        return self.lines >= count

    def cpu_seconds(self):
        '''The tool's CPU so far, from /proc (it is still running).'''
        with open(f'/proc/{self.pid}/stat') as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    def rss_kib(self):
        with open(f'/proc/{self.pid}/status') as status:
            return next(int(l.split()[1]) for l in status if l.startswith('VmRSS:'))

    def private_kib(self):
        '''Memory that is the process's own (RssAnon + RssShmem): not the
        binary's and libraries' file-backed pages, which RSS counts too.'''
        with open(f'/proc/{self.pid}/status') as status:
            return sum(int(l.split()[1]) for l in status if l.startswith(('RssAnon:', 'RssShmem:')))

    def sleeps_so_far(self):
        '''How often the tool's threads have blocked to wait (voluntary
        context switches, as measure's rusage counts them at the end): each
        is a sleep and a wake-up.'''
        total = 0
        for task in os.listdir(f'/proc/{self.pid}/task'):
            with open(f'/proc/{self.pid}/task/{task}/status') as status:
                total += next(int(l.split()[1]) for l in status if l.startswith('voluntary_ctxt_switches:'))
        return total

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self, timeout, kill=False):
        '''Waits for exit (or kills it); returns (status, cpu s, peak RSS KiB, wall s).'''
        if kill:
            self.kill()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self.reader.join(5)
        with open(self.result) as result:
            fields = result.read().split()
        os.unlink(self.result)
        # "pid N exit S cpu SECONDS maxrss KIB wall SECONDS sleeps N": measure's
        # wall (fork to exit), not this process's (see bench/measure.c)
        self.sleeps = int(fields[11])
        return int(fields[3]), float(fields[5]), int(fields[7]), float(fields[9])


def wait_notifying(bluez, run, timeout=30):
    '''Until the tool is subscribed and has printed its initial read. Either
    may come first: birdctl subscribes and then reads (changes before the
    read's reply are not readings, the read supersedes them), the peers read
    and then subscribe.'''
    characteristic = bluez.bus.get_object('org.bluez', ALPHA_PATH)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and run.running():
        try:
            if run.lines >= 1 and characteristic.Get('org.bluez.GattCharacteristic1', 'Notifying',
                                                     dbus_interface='org.freedesktop.DBus.Properties'):
                return True
        except dbus.DBusException:
            pass
        time.sleep(0.01)
    return False


# -- the jobs ------------------------------------------------------------------

def job_read(tool, bluez, runs):
    samples = []
    for _ in range(runs):
        run = Run(tool.read, bluez.env)
        status, cpu, rss, wall = run.finish(60)
        ok = status == 0 and run.first_line.rstrip().endswith(b'0.8')
        samples.append({'wall': wall, 'cpu': cpu, 'rss': rss, 'ok': ok, 'status': status,
                        'error': run.stderr.decode(errors='replace')[-300:]})
    return samples


def job_watch(tool, bluez, runs, count, method='Burst'):
    '''`count` notifications, as fast as the fake emits them (Burst) or
    2,000 a second (Pace: the client wakes for each).'''
    samples = []
    for _ in range(runs):
        run = Run(tool.watch(count + 1), bluez.env)  # the first line is the initial read
        if not wait_notifying(bluez, run):
            status, *_ = run.finish(5, kill=True)
            samples.append({'ok': False, 'status': status, 'error': run.stderr.decode(errors='replace')[-300:]})
            continue
        sleeps_before = run.sleeps_so_far()
        burst_started = time.monotonic()
        bluez.control(method, ADDRESS, ALPHA, dbus.UInt32(count), dbus.UInt32(101))
        run.wait_for_lines(count + 1, timeout=120)
        status, cpu, rss, _ = run.finish(10, kill=run.lines < count + 1)
        samples.append({'ok': status == 0 and run.lines == count + 1, 'status': status,
                        'cpu10k': cpu / (count / 10_000), 'wall': (run.last_line_at or time.monotonic()) - burst_started,
                        'wakeups100': (run.sleeps - sleeps_before) / (count / 100),
                        'lost': count + 1 - run.lines, 'rss': rss,
                        'error': run.stderr.decode(errors='replace')[-300:]})
    return samples


def job_idle(tool, bluez, seconds):
    run = Run(tool.watch(0), bluez.env)
    if not wait_notifying(bluez, run):
        run.finish(5, kill=True)
        return [{'ok': False, 'error': run.stderr.decode(errors='replace')[-300:]}]
    time.sleep(0.5)  # let start-up settle
    before = run.cpu_seconds()
    time.sleep(seconds)
    used = run.cpu_seconds() - before
    run.finish(5, kill=True)
    return [{'ok': True, 'idle': used}]


def job_memory(tool, bluez, small, large):
    '''Resident memory after `small` and after `large` notifications.'''
    run = Run(tool.watch(0), bluez.env)
    if not wait_notifying(bluez, run):
        run.finish(5, kill=True)
        return [{'ok': False, 'error': run.stderr.decode(errors='replace')[-300:]}]
    bluez.control('Burst', ADDRESS, ALPHA, dbus.UInt32(small), dbus.UInt32(101))
    run.wait_for_lines(small + 1, 60)
    after_small, private_small = run.rss_kib(), run.private_kib()
    sent = small
    while sent < large:
        chunk = min(100_000, large - sent)
        bluez.control('Burst', ADDRESS, ALPHA, dbus.UInt32(chunk), dbus.UInt32(101))
        sent += chunk
        run.wait_for_lines(sent + 1, 120)
    ok = run.lines == large + 1
    after_large, private_large = run.rss_kib(), run.private_kib()
    run.finish(5, kill=True)
    return [{'ok': ok, 'small': after_small, 'large': after_large, 'lost': large + 1 - run.lines,
             'private_small': private_small, 'private_large': private_large}]


# -- the table -----------------------------------------------------------------

def spread(values, scale=1.0, digits=0):
    values = [v * scale for v in values]
    if not values:
        return '–'
    median = statistics.median(values)
    if len(values) == 1:
        return f'{median:.{digits}f}'
    return f'{median:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})'


def ratio(values, floor_values):
    if not values or not floor_values:
        return '–'
    return f'{statistics.median(values) / statistics.median(floor_values):.2f}×'


def ratio_lines(results, everyone, memory, bluetoothctl_reads):
    '''One machine-readable line per figure: birdctl against the floor and
    against the best of the peers (bleak, simplepyble; bluetoothctl for a
    read's CPU and peak RSS) in this run.'''
    def median(tool, job, key):
        samples = bluetoothctl_reads if tool == BLUETOOTHCTL and job == 'read' else results.get(tool, {}).get(job, [])
        values = [s[key] for s in samples if s['ok'] and key in s]
        return statistics.median(values) if values else None

    birdctl, floor, peers = everyone[0].name, everyone[1].name, [t.name for t in everyone[4:]]
    acquiring, floor_acquiring = everyone[2].name, everyone[3].name
    figures = [('watch-cpu', 'watch', 'cpu10k'), ('paced-cpu', 'paced', 'cpu10k'), ('read-wall', 'read', 'wall'),
               ('read-cpu', 'read', 'cpu'), ('read-rss', 'read', 'rss')]
    lines = []
    for figure, job, key in figures:
        ours = median(birdctl, job, key)
        if ours is None:
            continue
        reference = median(floor, job, key)
        if reference:
            lines.append(f'RATIO {figure} birdctl/floor {ours / reference:.2f}')
        read_peers = peers + [BLUETOOTHCTL] if figure in ('read-cpu', 'read-rss') else peers
        best = min((v for v in (median(p, job, key) for p in read_peers) if v), default=None)
        if best:
            lines.append(f'RATIO {figure} birdctl/best-peer {ours / best:.2f}')
    for figure, job in (('watch-cpu-acquire', 'watch'), ('paced-cpu-acquire', 'paced')):
        ours, floor_ours = median(acquiring, job, 'cpu10k'), median(floor_acquiring, job, 'cpu10k')
        best = min((v for v in (median(p, job, 'cpu10k') for p in peers) if v), default=None)
        if ours and floor_ours:
            lines.append(f'RATIO {figure} birdctl/floor {ours / floor_ours:.2f}')
        if ours and best:
            lines.append(f'RATIO {figure} birdctl/best-peer {ours / best:.2f}')
    ours, reference = median(birdctl, 'watch-free', 'cpu10k'), median(floor, 'watch-free', 'cpu10k')
    if ours and reference:
        lines.append(f'RATIO watch-cpu-fake-on-any-cpu birdctl/floor {ours / reference:.2f}')
    cached, empty = median(birdctl, 'read10k', 'cpu'), median(birdctl, 'read', 'cpu')
    if cached and empty:
        lines.append(f'RATIO read-10k-cached birdctl/empty-cache {cached / empty:.2f}')
    m = memory.get(birdctl, {})
    if 'private_large' in m:
        lines.append(f'RATIO watch-private-mib birdctl {max(m["private_small"], m["private_large"]) / 1024:.2f}')
    return lines


def failures(samples):
    bad = [s for s in samples if not s['ok']]
    if not bad:
        return ''
    return f' ⚠ {len(bad)}/{len(samples)} failed (exit {bad[0].get("status")}: {bad[0].get("error", "").strip()[-120:]})'


def main():
    birdctl, floor, Run.measure, python, output = sys.argv[1:6]
    quick = '--quick' in sys.argv
    read_runs, watch_runs, count = (3, 1, 10_000) if quick else (10, 3, 100_000)
    # Two bursts a round, one after the other: with one, a single slow
    # sample of three decided the median (0.068–0.111 s per 10k for birdctl
    # in one run, before the load had a CPU of its own).
    bursts_per_round = 2
    # Paced through AcquireNotify, a wake-up per notification, is the nearest
    # target once the burst is steady (1.02-1.30x the floor's in three runs,
    # one sample of three at 0.169 against a median of 0.119): two a round too.
    paced_per_round = 2
    paced = 2_000 if quick else 10_000
    idle_seconds = 2 if quick else 10
    memory_large = 100_000 if quick else 1_000_000
    everyone = tools(birdctl, floor, python)
    results = {t.name: {} for t in everyone}
    bluetoothctl_reads = []
    started = time.monotonic()

    def say(*parts):
        print(*parts, file=sys.stderr, flush=True)

    # Round by round, every tool in turn, so that a drift of the machine's
    # speed during the run (it is shared) falls on all of them alike: run one
    # after the other, the ratios to the floor moved by 0.1-0.4 between runs.
    for tool in everyone:
        results[tool.name] = {'read': [], 'read10k': [], 'watch': [], 'paced': [], 'idle': [], 'watch-free': []}
    for round_number in range(watch_runs):
        reads_now = len(range(round_number, read_runs, watch_runs))
        # Reads with 10,000 cached devices alternate with reads with none, on
        # a second bus: run apart, a few ms of CPU moved by a third with the
        # machine's state (1.38× once, 1.00× interleaved).
        with PrivateBlueZ() as cached:
            cached.control('AddCachedDevices', dbus.UInt32(10_000))
            add_bird(cached)
            for tool in everyone:
                # The AcquireNotify variants read as the others do: their reads are not run twice.
                reads = tool not in everyone[2:4]
                with PrivateBlueZ() as bluez:
                    add_bird(bluez)
                    if reads:
                        say(f'{tool.name}: read ×{reads_now}, and as many with 10,000 cached devices '
                            f'(round {round_number + 1} of {watch_runs})')
                        for _ in range(reads_now):
                            results[tool.name]['read'] += job_read(tool, bluez, 1)
                            results[tool.name]['read10k'] += job_read(tool, cached, 1)
                    say(f'{tool.name}: watch {count:,} notifications ×{bursts_per_round} (round {round_number + 1})')
                    results[tool.name]['watch'] += job_watch(tool, bluez, bursts_per_round, count)
                    say(f'{tool.name}: watch {paced:,} notifications paced 2,000 a second ×{paced_per_round} '
                        f'(round {round_number + 1})')
                    results[tool.name]['paced'] += job_watch(tool, bluez, paced_per_round, paced, method='Pace')
                    if round_number == 0:
                        say(f'{tool.name}: idle {idle_seconds} s')
                        results[tool.name]['idle'] = job_idle(tool, bluez, idle_seconds)
        # The signal burst again with the bus and the fake free to share
        # both CPUs with the client (see private_bluez.producer_cpu): what
        # the burst looked like before they were kept to one, for the record.
        with PrivateBlueZ(pinned=False) as free:
            add_bird(free)
            for tool in everyone[:2]:
                say(f'{tool.name}: watch {count:,} notifications ×{bursts_per_round}, the fake on any CPU '
                    f'(round {round_number + 1})')
                results[tool.name]['watch-free'] += job_watch(tool, free, bursts_per_round, count)
        with PrivateBlueZ() as bluez:
            add_bird(bluez)
            say(f'{BLUETOOTHCTL}: read ×{reads_now} (round {round_number + 1})')
            bluetoothctl_reads += [bluetoothctl_read.read(Run.measure, bluez.env, ADDRESS, ALPHA_PATH, '38 30')
                                   for _ in range(reads_now)]
    scan_lines, scan_ratios = scan_bench.run(birdctl, python, PEERS, Run, PrivateBlueZ, add_bird, ADDRESS, quick, say)
    fleet_lines, fleet_ratios = fleet_bench.run(birdctl, Run, PrivateBlueZ, quick, say)
    memory = {}
    for tool in everyone[:3]:  # birdctl (both ways) and the floor: the flatness target is ours
        with PrivateBlueZ() as bluez:
            add_bird(bluez)
            say(f'{tool.name}: memory after 10,000 and {memory_large:,} notifications')
            memory[tool.name] = job_memory(tool, bluez, 10_000, memory_large)[0]

    counted, counted_paced = {}, {}
    with tempfile.TemporaryDirectory(prefix='bench-valgrind-') as scratch:
        counted_tools = tools(instructions.readable_copy(birdctl, scratch), floor, python)[:4]
        for tool in counted_tools:
            say(f'{tool.name}: instructions per notification (callgrind, watches of {instructions.SMALL:,} '
                f'and {instructions.LARGE:,})')
            counted[tool.name] = instructions.per_notification(tool, PrivateBlueZ, add_bird, ADDRESS, ALPHA, ALPHA_PATH)
        for tool in counted_tools[2:]:
            say(f'{tool.name}: instructions per notification paced 2,000 a second (callgrind)')
            counted_paced[tool.name] = instructions.per_notification(tool, PrivateBlueZ, add_bird, ADDRESS, ALPHA,
                                                                     ALPHA_PATH, method='Pace')

    mqtt_lines, mqtt_ratios = mqtt_bench.run(birdctl, PrivateBlueZ, add_bird, quick, say)

    floor = results[everyone[1].name]

    def ok(samples, key):
        return [s[key] for s in samples if s['ok']]

    # No date or host name: the page docs/figures.md is made from this, and git says when.
    lines = [f'birdctl benchmarks — {os.cpu_count()} CPUs, Linux {platform.release()}; '
             f'`make bench{" QUICK=1" if quick else ""}`, {time.monotonic() - started:.0f} s',
             '',
             f'Medians (min–max). read: {read_runs} runs; watch: {watch_runs * bursts_per_round} runs of {count:,} notifications '
             f'from the fake BlueZ as fast as it emits them, and {watch_runs * paced_per_round} runs of {paced:,} '
             'paced at 2,000 a second (a wake-up each); ratios are to the floor.',
             '',
             'The bus and the fake BlueZ (the load) run on one CPU, the tools anywhere: CPU in a burst depends '
             'on how many notifications a wake-up finds waiting (a client that keeps up sleeps and wakes for '
             'nearly every one, one that falls behind takes several per wake-up, which costs less), and with the '
             'load on both CPUs of a small machine who ran when decided that. The burst\'s wake-ups (times the '
             'client blocked to wait, per 100 notifications) stand beside its CPU, and instructions per '
             'notification (below) give the cost no load moves.',
             '',
             '| tool | read wall ms | read CPU ms | read peak RSS MiB | read with 10k cached: wall / CPU ms '
             '| watch CPU s per 10k | burst wake-ups per 100 | paced CPU s per 10k | watch wall s to last line '
             f'| lines lost | watch peak RSS MiB | idle CPU ms in {idle_seconds} s |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for tool in everyone:
        r = results[tool.name]
        row = [tool.name,
               f'{spread(ok(r["read"], "wall"), 1000)} · {ratio(ok(r["read"], "wall"), ok(floor["read"], "wall"))}',
               spread(ok(r['read'], 'cpu'), 1000),
               spread(ok(r['read'], 'rss'), 1 / 1024, 1),
               f'{spread(ok(r["read10k"], "wall"), 1000)} / {spread(ok(r["read10k"], "cpu"), 1000)} · '
               f'CPU {ratio(ok(r["read10k"], "cpu"), ok(r["read"], "cpu"))} of own read',
               f'{spread(ok(r["watch"], "cpu10k"), 1, 3)} · '
               f'{ratio(ok(r["watch"], "cpu10k"), ok(floor["watch"], "cpu10k"))}',
               spread(ok(r['watch'], 'wakeups100')),
               f'{spread(ok(r["paced"], "cpu10k"), 1, 3)} · '
               f'{ratio(ok(r["paced"], "cpu10k"), ok(floor["paced"], "cpu10k"))}',
               spread([s['wall'] for s in r['watch'] if 'wall' in s], 1, 2),
               str(sum(s.get('lost', 0) for s in r['watch'] + r['paced'])),
               spread([s['rss'] for s in r['watch'] if 'rss' in s], 1 / 1024, 1),
               spread(ok(r['idle'], 'idle'), 1000)]
        problems = ''.join(failures(r[job]) for job in ('read', 'watch', 'paced', 'idle', 'read10k'))
        lines.append('| ' + ' | '.join(row) + ' |' + problems)
    if bluetoothctl_reads:
        row = [BLUETOOTHCTL, '–', spread(ok(bluetoothctl_reads, 'cpu'), 1000),
               spread(ok(bluetoothctl_reads, 'rss'), 1 / 1024, 1)] + ['–'] * 8
        lines.append('| ' + ' | '.join(row) + ' |' + failures(bluetoothctl_reads))
    lines += ['', f'{BLUETOOTHCTL}: connect, select the attribute, read and disconnect in its shell on a '
              'pseudo-terminal, one line after the answer to the last; its CPU and peak RSS are its own, its wall '
              'time is the dialogue\'s pace and is left out.']
    lines += scan_lines
    lines += fleet_lines
    lines += ['', f'Memory of a running `watch` (MiB) after 10,000 and after {memory_large:,} notifications: '
              'resident (RSS), and private (RssAnon + RssShmem: without the binary\'s file-backed pages)',
              '', f'| tool | RSS after 10,000 | RSS after {memory_large:,} | private after 10,000 | '
              f'private after {memory_large:,} | private growth | lines lost |', '|---|---|---|---|---|---|---|']
    for name, m in memory.items():
        if m['ok'] or 'small' in m:
            lines.append(f'| {name} | {m["small"] / 1024:.1f} | {m["large"] / 1024:.1f} | '
                         f'{m["private_small"] / 1024:.2f} | {m["private_large"] / 1024:.2f} | '
                         f'{(m["private_large"] - m["private_small"]) / 1024:+.2f} | {m["lost"]} |')
        else:
            lines.append(f'| {name} | failed: {m.get("error", "")[-120:]} | | | | | |')

    lines += ['', 'Instructions per notification (callgrind, user space: the difference between a watch of '
              f'{instructions.LARGE:,} and one of {instructions.SMALL:,} notifications, divided by '
              f'{instructions.LARGE - instructions.SMALL:,}). Unlike CPU seconds in a burst, they do not move with '
              'the machine\'s load or with how many notifications a wake-up finds. Paced (2,000 a second, a '
              'wake-up each) for AcquireNotify only: the difference from the burst is what a wake-up costs; on the '
              'signal path a client under valgrind cannot keep up with that pace.', '',
              '| tool | instructions per notification, burst | × the floor on the same path | paced | × |',
              '|---|---|---|---|---|']

    def counted_cells(table, index, tool):
        if tool.name not in table:
            return '– | –'
        value, error = table[tool.name]
        reference = table[everyone[index | 1].name][0]  # the floor of the same path
        if value is None:
            return f'failed: {error[-120:]} | '
        return f'{value:,.0f} | {f"{value / reference:.2f}×" if reference else "–"}'

    for index, tool in enumerate(everyone[:4]):
        lines.append(f'| {tool.name} | {counted_cells(counted, index, tool)} | '
                     f'{counted_cells(counted_paced, index, tool)} |')

    b, f = results['birdctl'], floor
    a, fa = results[everyone[2].name], results[everyone[3].name]
    targets = [
        ('watch CPU per 10k in a burst ≤ 1.15× the floor', ok(b['watch'], 'cpu10k'), ok(f['watch'], 'cpu10k'), 1.15),
        ('watch CPU per 10k paced ≤ 1.3× the floor', ok(b['paced'], 'cpu10k'), ok(f['paced'], 'cpu10k'), 1.3),
        ('watch CPU per 10k in a burst, AcquireNotify, ≤ 1.15× the floor\'s', ok(a['watch'], 'cpu10k'),
         ok(fa['watch'], 'cpu10k'), 1.15),
        ('watch CPU per 10k paced, AcquireNotify, ≤ 1.3× the floor\'s', ok(a['paced'], 'cpu10k'),
         ok(fa['paced'], 'cpu10k'), 1.3),
        ('read wall ≤ 1.5× the floor', ok(b['read'], 'wall'), ok(f['read'], 'wall'), 1.5),
        ('read peak RSS ≤ bluetoothctl\'s', ok(b['read'], 'rss'), ok(bluetoothctl_reads, 'rss'), 1.0),
        # The fake's wall time to marshal 10,000 devices (0.3 s in dbus-python) is
        # not bluetoothd's, so the client's own CPU is compared.
        ('read with 10k cached ≤ 1.3× read with none (CPU)', ok(b['read10k'], 'cpu'), ok(b['read'], 'cpu'), 1.3),
    ]
    def wake_ups(results):
        return spread(ok(results['watch'], 'wakeups100'))

    lines += ['', 'Targets (birdctl):', '']
    for name, ours, reference, limit in targets:
        if ours and reference:
            value = statistics.median(ours) / statistics.median(reference)
            lines.append(f'- {name}: {value:.2f}× — {"met" if value <= limit else "MISSED"}')
            if name == targets[0][0]:
                lines.append(f'  (wake-ups per 100 notifications in the burst: {wake_ups(b)}, the floor {wake_ups(f)})')
    lost = sum(s.get('lost', 0) for s in b['watch'])
    lines.append(f'- no lost lines: {lost} lost — {"met" if lost == 0 else "MISSED"}')
    idle = ok(b['idle'], 'idle')
    if idle:
        lines.append(f'- idle CPU ≈ 0: {idle[0] * 1000:.0f} ms in {idle_seconds} s — '
                     f'{"met" if idle[0] < 0.02 else "MISSED"}')
    peak = max([s['rss'] for s in b['read'] + b['watch'] if 'rss' in s] or [0]) / 1024
    lines.append(f'- peak RSS < 20 MiB: {peak:.1f} MiB — {"met" if peak < 20 else "MISSED"}')
    m = memory.get('birdctl', {})
    if 'small' in m:
        growth = (m['private_large'] - m['private_small']) / 1024
        largest = max(m['private_small'], m['private_large']) / 1024
        lines.append(f'- private memory ≤ 2 MiB and flat (± 0.25 MiB from 10,000 to {memory_large:,} notifications): '
                     f'{largest:.2f} MiB, {growth:+.2f} MiB — {"met" if largest <= 2 and abs(growth) <= 0.25 else "MISSED"}')

    lines += mqtt_lines
    lines += ['', 'The burst through signals with the bus and the fake free to run on either CPU, sharing them '
              'with the client (how `make bench` measured it before they were kept to one): how many notifications a '
              'wake-up finds then depends on who runs when, and the ratio swings from run to run.', '',
              '| tool | watch CPU s per 10k, burst | × the floor | wake-ups per 100 |', '|---|---|---|---|']
    for tool in everyone[:2]:
        free = results[tool.name]['watch-free']
        lines.append(f'| {tool.name} | {spread(ok(free, "cpu10k"), 1, 3)} | '
                     f'{ratio(ok(free, "cpu10k"), ok(floor["watch-free"], "cpu10k"))} | '
                     f'{spread(ok(free, "wakeups100"))} |{failures(free)}')

    lines += [''] + ratio_lines(results, everyone, memory, bluetoothctl_reads)
    for figure, ours, reference in (('watch-instructions', everyone[0], everyone[1]),
                                    ('watch-instructions-acquire', everyone[2], everyone[3])):
        if counted[ours.name][0] and counted[reference.name][0]:
            lines.append(f'RATIO {figure} birdctl/floor {counted[ours.name][0] / counted[reference.name][0]:.2f}')
    ours, reference = counted_paced[everyone[2].name][0], counted_paced[everyone[3].name][0]
    if ours and reference:
        lines.append(f'RATIO paced-instructions-acquire birdctl/floor {ours / reference:.2f}')
    lines += mqtt_ratios
    lines += scan_ratios
    lines += fleet_ratios

    table = '\n'.join(lines) + '\n'
    print(table)
    with open(output, 'w') as out:
        out.write(table)


if __name__ == '__main__':
    main()
