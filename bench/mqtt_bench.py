'''The MQTT gateway's part of `make bench`: `birdctl watch --mqtt` beside the
pipeline people use without it, `birdctl watch --json | mosquitto_pub -l`,
both publishing QoS 1 to one mosquitto on a loopback port.

- CPU per 10k readings: a burst of notifications from the fake BlueZ; the
  clock stops when a subscriber has every reading; the CPU is that of every
  process of the client (birdctl; birdctl and mosquitto_pub), from /proc.
- Latency: paced notifications (100/s); for each, the time from the fake's
  PushValue call to the subscriber's line (mosquitto_sub flushes each).
'''

import collections
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time

import dbus

import instructions

ADDRESS = 'F0:0D:B1:7D:00:01'
ALPHA = 'b7ac06dc-09ff-40ed-b03a-55d09b080003'
ALPHA_PATH = '/org/bluez/hci0/dev_F0_0D_B1_7D_00_01/service000a/char000f'


class Broker:
    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix='bench-mosquitto-')
        with socket_bound() as port:
            self.port = port
        config = os.path.join(self.directory, 'mosquitto.conf')
        with open(config, 'w') as out:
            out.write(f'listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n'
                      'max_queued_messages 0\n')
        self.process = subprocess.Popen(['/usr/sbin/mosquitto', '-c', config], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(['mosquitto_pub', '-p', str(self.port), '-t', 'bench/ping', '-m', 'x'],
                              stderr=subprocess.DEVNULL).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError('mosquitto did not start')

    def stop(self):
        self.process.kill()
        self.process.wait()


class socket_bound:
    '''A free loopback port (bound, then released for the broker).'''
    def __enter__(self):
        import socket
        self.socket = socket.socket()
        self.socket.bind(('127.0.0.1', 0))
        return self.socket.getsockname()[1]

    def __exit__(self, *_):
        self.socket.close()


class Subscriber:
    '''mosquitto_sub on one topic; the arrival time of each message.'''
    def __init__(self, port, topic):
        self.process = subprocess.Popen(
            # -R: not a retained value from an earlier run.
            ['mosquitto_sub', '-p', str(port), '-q', '1', '-R', '-t', topic, '-t', 'bench/ready'],
            stdout=subprocess.PIPE)
        self.arrivals = []
        self.ready = threading.Event()
        threading.Thread(target=self.read, daemon=True).start()
        deadline = time.monotonic() + 10
        while not self.ready.is_set() and time.monotonic() < deadline:
            subprocess.run(['mosquitto_pub', '-p', str(port), '-t', 'bench/ready', '-m', 'ready'])
            self.ready.wait(0.2)

    def read(self):
        for line in self.process.stdout:
            if line.strip() == b'ready':
                self.ready.set()
            elif b'"event"' not in line or b'"reading"' in line:  # the pipeline publishes events too
                self.arrivals.append(time.monotonic())

    def wait_for(self, count, timeout):
        deadline = time.monotonic() + timeout
        while len(self.arrivals) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return len(self.arrivals) >= count

    def stop(self):
        self.process.kill()
        self.process.wait()


def tree_cpu(pid):
    '''CPU seconds of `pid` and its descendants, now.'''
    children = {}
    cpu = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as stat:
                fields = stat.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo += children.get(p, [])
    return total


def clients(birdctl, port):
    native = [birdctl, 'watch', ADDRESS, 'alpha', '--quiet', '--no-discovery',
              '--mqtt', f'mqtt://127.0.0.1:{port}/bench']
    pipeline = ['/bin/sh', '-c', f'exec {birdctl} watch {ADDRESS} alpha --json '
                f'| mosquitto_pub -p {port} -q 1 -l -t bench/pipe']
    return [('birdctl --mqtt', native, f'bench/{ADDRESS}/alpha'),
            ('birdctl --json | mosquitto_pub -l -q 1', pipeline, 'bench/pipe')]


def wait_notifying(bluez, subscriber, timeout=30):
    '''Until the client is subscribed and its initial read reached the broker.'''
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if subscriber.arrivals and bluez.bus.get_object('org.bluez', ALPHA_PATH).Get(
                    'org.bluez.GattCharacteristic1', 'Notifying', dbus_interface='org.freedesktop.DBus.Properties'):
                return True
        except dbus.DBusException:
            pass
        time.sleep(0.01)
    return False


def run_client(bluez, broker, command, topic, work):
    subscriber = Subscriber(broker.port, topic)
    process = subprocess.Popen(command, env=bluez.env, stderr=subprocess.PIPE, start_new_session=True)
    try:
        if not wait_notifying(bluez, subscriber):
            return {'ok': False, 'error': 'not notifying'}
        return work(process, subscriber)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        subscriber.stop()


def job_cpu(bluez, broker, command, topic, count):
    def work(process, subscriber):
        before = tree_cpu(process.pid)
        bluez.control('Burst', ADDRESS, ALPHA, dbus.UInt32(count), dbus.UInt32(101))
        ok = subscriber.wait_for(count + 1, 180)
        used = tree_cpu(process.pid) - before
        return {'ok': ok, 'cpu10k': used / (count / 10_000), 'lost': count + 1 - len(subscriber.arrivals)}
    return run_client(bluez, broker, command, topic, work)


def job_latency(bluez, broker, command, topic, count, rate):
    def work(process, subscriber):
        sent = []
        for i in range(count):
            sent.append(time.monotonic())
            bluez.control('PushValue', ADDRESS, ALPHA, dbus.ByteArray(str(i % 100).encode()))
            time.sleep(max(0.0, sent[-1] + 1 / rate - time.monotonic()))
        ok = subscriber.wait_for(count + 1, 30)
        latencies = sorted(a - s for s, a in zip(sent, subscriber.arrivals[1:]))
        if not latencies:
            return {'ok': False, 'error': 'nothing arrived'}
        return {'ok': ok, 'p50': statistics.median(latencies),
                'p99': latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]}
    return run_client(bluez, broker, command, topic, work)


Counted = collections.namedtuple('Counted', 'name watch')


def counted_clients(birdctl, port):
    '''Both clients ending after n readings, for callgrind (the pipeline as
    its two stages; mosquitto_pub ends at the end of its input).'''
    native = ['watch', ADDRESS, 'alpha', '--quiet', '--no-discovery', '--mqtt', f'mqtt://127.0.0.1:{port}/bench']
    return [Counted('birdctl --mqtt', lambda n: [birdctl, *native, '--count', str(n)]),
            Counted('birdctl --json | mosquitto_pub -l -q 1',
                    lambda n: [[birdctl, 'watch', ADDRESS, 'alpha', '--json', '--count', str(n)],
                               ['mosquitto_pub', '-p', str(port), '-q', '1', '-l', '-t', 'bench/pipe']])]


def run(birdctl, private_bluez, add_bird, quick, say):
    '''Every client, both jobs; the table's lines.'''
    count, runs, paced = (10_000, 1, 200) if quick else (50_000, 3, 1000)
    broker = Broker()
    results = {}
    counted = {}
    try:
        # Round by round, each client in turn, as in bench/run.py.
        cpu_runs = {name: [] for name, _, _ in clients(birdctl, broker.port)}
        for round_number in range(runs):
            for name, command, topic in clients(birdctl, broker.port):
                with private_bluez() as bluez:
                    add_bird(bluez)
                    say(f'{name}: {count:,} readings to the broker (round {round_number + 1} of {runs})')
                    cpu_runs[name].append(job_cpu(bluez, broker, command, topic, count))
        for name, command, topic in clients(birdctl, broker.port):
            with private_bluez() as bluez:
                add_bird(bluez)
                say(f'{name}: latency of {paced} readings at 100/s')
                results[name] = (cpu_runs[name], job_latency(bluez, broker, command, topic, paced, 100))
        with tempfile.TemporaryDirectory(prefix='bench-mqtt-') as scratch:
            for client in counted_clients(instructions.readable_copy(birdctl, scratch), broker.port):
                say(f'{client.name}: instructions per reading (callgrind)')
                counted[client.name] = instructions.per_notification(client, private_bluez, add_bird, ADDRESS, ALPHA,
                                                                     ALPHA_PATH)
    finally:
        broker.stop()
    lines = ['', f'MQTT gateway: {count:,} readings as fast as the fake emits them ({runs} runs), then {paced} at '
             '100/s, QoS 1 to one mosquitto on loopback; CPU of the whole client (for the pipeline, birdctl and '
             'mosquitto_pub); latency from the notification to the subscriber\'s line; instructions per reading '
             f'(callgrind, user space, every process of the client: a burst of {instructions.LARGE:,} less one of '
             f'{instructions.SMALL:,}, divided by the difference). The native path publishes the value and the '
             'bird\'s state (once per wake-up of its loop, after the readings it found; a newer state replaces one '
             'still waiting), the pipeline one JSON line per reading.', '',
             '| client | CPU s per 10k readings | lost | latency p50 ms | latency p99 ms | instructions per reading |',
             '|---|---|---|---|---|---|']
    for name, (cpu, latency) in results.items():
        good = [s['cpu10k'] for s in cpu if s['ok']]
        cpu_text = f'{statistics.median(good):.3f}' if good else 'failed: ' + str(cpu[0].get('error', ''))
        lost = sum(s.get('lost', 0) for s in cpu)
        lat = (f'{latency["p50"] * 1000:.1f} | {latency["p99"] * 1000:.1f}' if latency.get('ok')
               else f'failed: {latency.get("error", "")} |')
        per_reading, error = counted.get(name, (None, 'not counted'))
        instructions_text = f'{per_reading:,.0f}' if per_reading else f'failed: {error}'
        lines.append(f'| {name.replace("|", "&#124;")} | {cpu_text} | {lost} | {lat} | {instructions_text} |')
    native_name, pipeline_name = (name for name, _, _ in clients(birdctl, 0))
    ours = [s['cpu10k'] for s in results[native_name][0] if s['ok']] if native_name in results else []
    theirs = [s['cpu10k'] for s in results[pipeline_name][0] if s['ok']] if pipeline_name in results else []
    ratios = []
    if ours and theirs:
        ratio = statistics.median(ours) / statistics.median(theirs)
        lines += ['', f'- `--mqtt` CPU below the pipeline\'s: {ratio:.2f}× — {"met" if ratio < 1 else "MISSED"}']
        ratios.append(f'RATIO mqtt-cpu birdctl/pipeline {ratio:.2f}')
    ours, theirs = counted.get(native_name, (None,))[0], counted.get(pipeline_name, (None,))[0]
    if ours and theirs:
        lines.append(f'- `--mqtt` instructions per reading below the pipeline\'s: {ours / theirs:.2f}× — '
                     f'{"met" if ours < theirs else "MISSED"}')
        ratios.append(f'RATIO mqtt-instructions birdctl/pipeline {ours / theirs:.2f}')
    return lines, ratios
