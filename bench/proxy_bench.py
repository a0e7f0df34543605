#!/usr/bin/python3
'''The proxy's part of `make bench`: `watch --all --proxy` on the fake BlueZ,
served in plaintext on loopback to Home Assistant's client libraries
(aioesphomeapi 23.0.0, bleak-esphome 1.0.0: fixtures/proxy/requirements.txt's
venv).

- Advertisements: 1,000 devices that are not Birds, heard 1,000 times a
  second in all (the fake's Advertisers), for SECONDS: birdctl's CPU per
  advertisement heard, with one client subscribed to raw advertisements,
  beside the same watch without the proxy, which hears them all the same
  (the difference is what passing them on costs); how many of those heard
  reached the client; the watch's RSS at the window's start and end.
- A read: Home Assistant reading the bird's alpha through the proxy
  (connect, read, disconnect; the services kept, as it reconnects), beside
  `birdctl read` of the same bird (a process: start, connect, read its
  three fields, disconnect, exit); wall times, medians of RUNS. Target:
  ≤ 1.2× (`RATIO proxy-read-wall proxy/birdctl-read`).

    bench/proxy_bench.py BIRDCTL PROXY_PYTHON OUTPUT.md [--quick]
'''

import json
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time

import dbus

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from private_bluez import PrivateBlueZ  # noqa: E402
from run import ADDRESS, ALPHA, add_bird  # noqa: E402

PEERS = os.path.join(HERE, 'peers')
ADVERTISERS, PER_SECOND = 1000, 1000
TICK = os.sysconf('SC_CLK_TCK')


class Watch:
    '''`birdctl watch --all` with `options`; its stderr lines kept on a thread.'''
    def __init__(self, birdctl, env, *options):
        self.process = subprocess.Popen([birdctl, 'watch', '--all', '--json', *options], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stderr], daemon=True).start()

    def port(self, timeout=30):
        '''The proxy's port, from its line on stderr.'''
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if found := re.search(r'serving a Bluetooth proxy at 127\.0\.0\.1:(\d+)', line):
                return int(found.group(1))
        raise RuntimeError('the proxy said no port')

    def cpu(self):
        '''User and system CPU seconds so far.'''
        with open(f'/proc/{self.process.pid}/stat') as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss(self):
        '''Resident memory now, MiB.'''
        with open(f'/proc/{self.process.pid}/status') as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith('VmRSS:'))
        return kib / 1024

    def stop(self):
        self.process.terminate()
        self.process.wait(30)


def advertisements(birdctl, python, proxied, seconds, warm_up=5):
    '''(CPU ms per advertisement, advertisements heard, passed on, RSS MiB at the start and end).'''
    with PrivateBlueZ() as bluez:
        bluez.control('Advertisers', dbus.UInt32(ADVERTISERS), dbus.UInt32(PER_SECOND))
        watch = Watch(birdctl, bluez.env, *(['--proxy', '127.0.0.1:0'] if proxied else []))
        counter = None
        try:
            if proxied:
                counter = subprocess.Popen([python, os.path.join(PEERS, 'esphome_counter.py'), str(watch.port()),
                                            str(warm_up + seconds)], stdout=subprocess.PIPE, text=True)
                assert json.loads(counter.stdout.readline()).get('subscribed')
            counted = {}

            def at(second):
                '''The window's samples at the client's second `second` (or the clock's, without a client).'''
                if counter:
                    while (line := json.loads(counter.stdout.readline()))['at'] < second:
                        pass
                    counted[second] = line['count']
                else:
                    time.sleep(max(0, started + second - time.monotonic()))
                return watch.cpu(), int(bluez.control('AdvertisersHeard')), watch.rss()
            started = time.monotonic()
            cpu0, heard0, rss0 = at(warm_up)
            cpu1, heard1, rss1 = at(warm_up + seconds)
            if counter:
                counter.wait(30)
            heard = heard1 - heard0
            passed = counted[warm_up + seconds] - counted[warm_up] if counter else 0
            return (cpu1 - cpu0) * 1000 / max(heard, 1), heard, passed, rss0, rss1
        finally:
            if counter and counter.poll() is None:
                counter.kill()
            watch.stop()


def reads(birdctl, python, runs):
    '''(birdctl read's wall ms, the proxy's wall ms), each a list of runs.'''
    with PrivateBlueZ() as bluez:
        add_bird(bluez)
        direct = []
        for _ in range(runs):
            started = time.monotonic()
            done = subprocess.run([birdctl, 'read', ADDRESS], env=bluez.env, capture_output=True, timeout=60)
            direct.append((time.monotonic() - started) * 1000)
            assert done.returncode == 0, done.stderr
        # The watch follows no Bird here (--min-rssi above the bird's -50), so Home Assistant may link it.
        watch = Watch(birdctl, bluez.env, '--min-rssi', '-30', '--proxy', '127.0.0.1:0')
        try:
            client = subprocess.run([python, os.path.join(PEERS, 'esphome_reads.py'), str(watch.port()), ADDRESS, ALPHA,
                                     str(runs)], capture_output=True, text=True, timeout=300)
            result = json.loads(client.stdout.strip().split('\n')[-1]) if client.returncode == 0 else None
            assert result and result['value'] == b'80'.hex(), client.stderr[-2000:]
            return direct, result['ms']
        finally:
            watch.stop()


def spread(values, digits=1):
    return f'{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})'


def main():
    birdctl, python, output = sys.argv[1], sys.argv[2], sys.argv[3]
    quick = '--quick' in sys.argv[4:]
    seconds, runs = (10, 3) if quick else (60, 10)
    print(f'proxy: {ADVERTISERS:,} advertisers, {PER_SECOND:,} a second, {seconds} s, without then with the proxy', flush=True)
    alone = advertisements(birdctl, python, False, seconds)
    proxied = advertisements(birdctl, python, True, seconds)
    print(f'proxy: a read through it and birdctl read, {runs} runs each', flush=True)
    direct, through = reads(birdctl, python, runs)
    added = proxied[0] - alone[0]
    ratio = statistics.median(through) / statistics.median(direct)
    lines = [
        f'The proxy (`watch --all --proxy`, plaintext on loopback, aioesphomeapi 23.0.0 and bleak-esphome 1.0.0): '
        f'{ADVERTISERS:,} devices that are not Birds heard {PER_SECOND:,} times a second in all, {seconds} s after '
        f'5 s of warm-up; a read {runs} times.',
        '',
        '| measure | watch --all | watch --all --proxy, one client |',
        '|---|---|---|',
        f'| CPU per advertisement heard (µs) | {alone[0] * 1000:.1f} | {proxied[0] * 1000:.1f} '
        f'(passing it on: {added * 1000:+.1f}) |',
        f'| advertisements heard / passed on to the client | {alone[1]:,} / – | {proxied[1]:,} / {proxied[2]:,} |',
        f'| RSS at the window\'s start → end (MiB) | {alone[3]:.1f} → {alone[4]:.1f} | {proxied[3]:.1f} → {proxied[4]:.1f} |',
        '',
        '| a read of the bird\'s alpha | wall ms, median (min–max) | ratio |',
        '|---|---|---|',
        f'| `birdctl read` (a process; its three fields) | {spread(direct)} | 1.00× |',
        f'| through the proxy (connect, read, disconnect) | {spread(through)} | {ratio:.2f}× |',
    ]
    lines += [
        '',
        'RATIO proxy-read-wall proxy/birdctl-read: %.2f' % ratio,
        'RATIO proxy-cpu-per-advertisement proxied/alone: %.2f' % (proxied[0] / alone[0] if alone[0] else 0),
    ]
    text = '\n'.join(lines) + '\n'
    print(text, flush=True)
    with open(output, 'w') as out:
        out.write(text)


if __name__ == '__main__':
    main()
