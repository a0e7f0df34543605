'''The scan's part of `make bench`: `birdctl scan` and bleak's scanner, each
scanning 2 s for the Bird Service on the fake BlueZ, with one bird in range
and an empty cache, then with 10,000 cached devices besides (BlueZ keeps
every device it ever saw; the bird is one of them, so it comes back as an
RSSI change of a device the scanner may not have loaded). CPU and peak RSS
are the scanner's own (bench/measure), over the whole run: start-up, 2 s of
scanning, the list at the end. Target: birdctl's CPU with the 10,000 cached
devices ≤ 1.3× its CPU with none (`RATIO scan-10k-cached-cpu birdctl/empty-cache`).

The scan alone, without bleak (birdctl only unless VENV_PYTHON is given):

    /usr/bin/python3 bench/scan_bench.py BIRDCTL MEASURE [VENV_PYTHON] [--quick]
'''

import os
import statistics

import dbus

BIRD_SERVICE = 'b7ac06dc-09ff-40ed-b03a-55d09b08eb4a'
SECONDS = 2


def scanners(birdctl, python, peers):
    ours = [('birdctl', [birdctl, 'scan', '--timeout', str(SECONDS)])]
    if python is None:
        return ours
    return ours + [('bleak 3.1.0', [python, os.path.join(peers, 'bleak_client.py'), 'scan', '-', BIRD_SERVICE,
                                    str(SECONDS)])]


def job_scan(run_class, command, bluez, address, runs):
    samples = []
    for _ in range(runs):
        run = run_class(command, bluez.env)
        status, cpu, rss, _ = run.finish(60)
        found = run.first_line.startswith(address.encode())
        samples.append({'ok': status == 0 and found, 'cpu': cpu, 'rss': rss, 'status': status,
                        'error': run.stderr.decode(errors='replace')[-300:]})
    return samples


def run(birdctl, python, peers, run_class, private_bluez, add_bird, address, quick, say):
    '''(table lines, RATIO lines).'''
    runs = 1 if quick else 3
    results = {}
    for name, command in scanners(birdctl, python, peers):
        for cached in (0, 10_000):
            with private_bluez() as bluez:
                if cached:
                    bluez.control('AddCachedDevices', dbus.UInt32(cached))
                add_bird(bluez)
                say(f'{name}: scan {SECONDS} s with {cached:,} cached devices ×{runs}')
                results[name, cached] = job_scan(run_class, command, bluez, address, runs)

    def median(name, cached, key):
        values = [s[key] for s in results[name, cached] if s['ok']]
        return statistics.median(values) if values else None

    def shown(value, scale, digits):
        return '–' if value is None else f'{value * scale:.{digits}f}'

    lines = ['', f'Scan: {SECONDS} s for the Bird Service with one bird in range, first with an empty cache, then '
             f'with 10,000 cached devices besides; {runs} runs each, medians; CPU and peak RSS of the whole run.',
             '', '| scanner | CPU ms, empty cache | CPU ms, 10k cached | × | peak RSS MiB, empty | peak RSS MiB, '
             '10k cached |', '|---|---|---|---|---|---|']
    for name, _ in scanners(birdctl, python, peers):
        empty, full = median(name, 0, 'cpu'), median(name, 10_000, 'cpu')
        factor = f'{full / empty:.1f}×' if empty and full else '–'
        problems = [s for cached in (0, 10_000) for s in results[name, cached] if not s['ok']]
        note = f' ⚠ {len(problems)} failed (exit {problems[0]["status"]}: {problems[0]["error"].strip()[-120:]})' \
            if problems else ''
        lines.append(f'| {name} | {shown(empty, 1000, 0)} | {shown(full, 1000, 0)} | {factor} | '
                     f'{shown(median(name, 0, "rss"), 1 / 1024, 1)} | '
                     f'{shown(median(name, 10_000, "rss"), 1 / 1024, 1)} |{note}')
    ratios = []
    peer = ('bleak 3.1.0', 10_000) in results
    ours, theirs = median('birdctl', 10_000, 'cpu'), peer and median('bleak 3.1.0', 10_000, 'cpu')
    empty = median('birdctl', 0, 'cpu')
    if ours and empty:
        ratios.append(f'RATIO scan-10k-cached-cpu birdctl/empty-cache {ours / empty:.2f}')
        lines += ['', f'- scan CPU with 10k cached ≤ 1.3× with none: {ours / empty:.2f}× — '
                  f'{"met" if ours / empty <= 1.3 else "MISSED"}']
    if ours and theirs:
        ratios.append(f'RATIO scan-10k-cached-cpu birdctl/best-peer {ours / theirs:.2f}')
    ours, theirs = median('birdctl', 10_000, 'rss'), peer and median('bleak 3.1.0', 10_000, 'rss')
    if ours and theirs:
        ratios.append(f'RATIO scan-10k-cached-rss birdctl/best-peer {ours / theirs:.2f}')
    return lines, ratios


if __name__ == '__main__':
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run as harness
    from private_bluez import PrivateBlueZ
    arguments = [a for a in sys.argv[1:] if a != '--quick']
    harness.Run.measure = arguments[1]
    table, figures = run(arguments[0], arguments[2] if len(arguments) > 2 else None, harness.PEERS, harness.Run,
                         PrivateBlueZ, harness.add_bird, harness.ADDRESS, '--quick' in sys.argv,
                         lambda text: print(text, file=sys.stderr, flush=True))
    print('\n'.join(table + [''] + figures))
