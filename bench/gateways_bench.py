#!/usr/bin/python3
'''Several gateways sharing a broker (`watch --all --mqtt URL --fleet`), in
`make bench`: three gateways, each on a fake BlueZ of its own (the kitchen,
the garden and the hall hear the bird at -45, -60 and -80 dBm), one
mosquitto, the bird notifying 20 times a second (a PushValue to every fake:
only the holder's link carries it).

- Messages per reading: every message the gateways publish while the bird
  streams steadily (10 s), over the readings the holder published.
- The gap when the holder dies: from its `kill -9` to the first reading the
  next holder (the garden) publishes; the broker publishes the dead one's will
  at once (its socket closed).

    bench/gateways_bench.py BIRDCTL OUTPUT.md [--quick]
'''

import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

import dbus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqtt_bench import Broker  # noqa: E402
from private_bluez import PrivateBlueZ  # noqa: E402
from run import ADDRESS, ALPHA  # noqa: E402

ROOMS = {'kitchen': -45, 'garden': -60, 'hall': -80}
RATE = 20


class Messages:
    '''mosquitto_sub on everything: (arrival, topic) of each message.'''
    def __init__(self, port):
        self.process = subprocess.Popen(['mosquitto_sub', '-p', str(port), '-q', '1', '-v', '-t', '#'],
                                        stdout=subprocess.PIPE)
        self.seen = []
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.process.stdout:
            topic = line.split(b' ', 1)[0].decode(errors='replace')
            with self.lock:
                self.seen.append((time.monotonic(), topic))

    def since(self, start):
        with self.lock:
            return [(at, topic) for at, topic in self.seen if at >= start]

    def stop(self):
        self.process.kill()
        self.process.wait()


def wait(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise RuntimeError(f'{what} did not happen within {timeout} s')


def one_run(birdctl, quick):
    broker = Broker()
    fakes, gateways = {}, {}
    stop = threading.Event()
    try:
        for room, rssi in ROOMS.items():
            fake = PrivateBlueZ(pinned=False).__enter__()
            fake.control('AddBird', ADDRESS, 'Robin', dbus.ByteArray(b'#FF8800'), dbus.ByteArray(b'Robin'),
                         dbus.ByteArray(b'80'), dbus.Int16(rssi), False, True)
            fakes[room] = fake
        messages = Messages(broker.port)

        def air():
            value = 0
            while not stop.is_set():
                value = (value + 1) % 100
                for room, fake in fakes.items():
                    try:
                        fake.control('SetRSSI', ADDRESS, dbus.Int16(ROOMS[room] + random.randint(-2, 2)))
                        fake.control('PushValue', ADDRESS, ALPHA, dbus.ByteArray(str(value).encode()))
                    except dbus.DBusException:
                        pass  # a fake stopping at the end
                time.sleep(1 / RATE)
        threading.Thread(target=air, daemon=True).start()
        for room, fake in fakes.items():
            gateways[room] = subprocess.Popen(
                [birdctl, 'watch', '--all', 'alpha', '--quiet', '--mqtt', f'mqtt://127.0.0.1:{broker.port}/house/{room}',
                 '--fleet'], env=fake.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kitchen_alpha = f'house/kitchen/{ADDRESS}/alpha'
        started = time.monotonic()
        wait('readings through the kitchen', lambda: sum(t == kitchen_alpha for _, t in messages.since(started)) >= 20, 60)

        # Steady: what the gateways publish per reading.
        window = 5 if quick else 10
        begin = time.monotonic()
        time.sleep(window)
        steady = [topic for _, topic in messages.since(begin) if time.monotonic() - begin >= 0]
        readings = sum(topic == kitchen_alpha for topic in steady)
        per_reading = len(steady) / readings if readings else float('nan')

        # The holder dies.
        killed = time.monotonic()
        gateways['kitchen'].send_signal(signal.SIGKILL)
        garden_alpha = f'house/garden/{ADDRESS}/alpha'
        wait('a reading through the garden', lambda: any(t == garden_alpha for _, t in messages.since(killed)), 120)
        gap = min(at for at, t in messages.since(killed) if t == garden_alpha) - killed
        return per_reading, readings, gap
    finally:
        stop.set()
        for process in gateways.values():
            if process.poll() is None:
                process.kill()
            process.wait()
        time.sleep(0.1)
        for fake in fakes.values():
            fake.__exit__(None, None, None)
        if 'messages' in locals():
            messages.stop()
        broker.stop()


def main():
    birdctl, output = sys.argv[1], sys.argv[2]
    quick = '--quick' in sys.argv[3:]
    runs = 1 if quick else 3
    results = []
    for index in range(runs):
        print(f'fleet: three gateways, the holder killed (run {index + 1} of {runs})', flush=True)
        results.append(one_run(birdctl, quick))
    per_reading = statistics.median(r[0] for r in results)
    gaps = sorted(r[2] for r in results)
    lines = [
        'Several gateways (`watch --all --mqtt URL --fleet`): three gateways on fake BlueZes of their own, one mosquitto, '
        f'the bird notifying {RATE} times a second; {runs} run(s), medians (min–max).',
        '',
        '| measure | value |',
        '|---|---|',
        f'| messages the gateways publish per reading, streaming steadily | {per_reading:.2f} '
        f'({min(r[0] for r in results):.2f}–{max(r[0] for r in results):.2f}) |',
        f'| gap in readings when the holder is killed (kill -9 to the next holder\'s first reading) | '
        f'{statistics.median(gaps):.2f} s ({gaps[0]:.2f}–{gaps[-1]:.2f}) |',
    ]
    text = '\n'.join(lines) + '\n'
    print(text, flush=True)
    with open(output, 'w') as out:
        out.write(text)
    print('RATIO fleet messages per reading: %.2f' % per_reading)
    print('RATIO fleet gap when the holder dies (s): %.2f' % statistics.median(gaps))


if __name__ == '__main__':
    main()
