'''SimpleBLE's Python binding doing what birdctl does:
    simpleble_client.py read  ADDRESS UUID
    simpleble_client.py watch ADDRESS UUID COUNT   (COUNT 0: until killed)
SimpleBLE only hands out peripherals it has scanned, so it scans until the
address is seen.'''

import os
import sys
import threading

import simplepyble

from lines import Printer, line

BIRD_SERVICE = 'b7ac06dc-09ff-40ed-b03a-55d09b08eb4a'


def find(adapter, address):
    found = threading.Event()
    adapter.set_callback_on_scan_found(lambda p: p.address().upper() == address.upper() and found.set())
    adapter.scan_start()
    found.wait(10)
    adapter.scan_stop()
    for peripheral in adapter.scan_get_results():
        if peripheral.address().upper() == address.upper():
            return peripheral
    sys.exit(f'simpleble: {address} not found')


def main(mode, address, uuid, count):
    adapter = simplepyble.Adapter.get_adapters()[0]
    peripheral = find(adapter, address)
    peripheral.connect()
    print(line(address, peripheral.read(BIRD_SERVICE, uuid)), flush=True)  # as birdctl hands on its first line at once
    if mode == 'watch':
        printer = Printer(address, count)
        peripheral.notify(BIRD_SERVICE, uuid, printer)
        while not printer.done.wait(1):
            pass
        sys.stdout.flush()
    peripheral.disconnect()


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    # simplepyble 1.2.0 crashes (SIGSEGV) in its destructors at interpreter
    # exit, after its work is done; leave before them so its figures count.
    sys.stdout.flush()
    os._exit(0)
