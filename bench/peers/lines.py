'''What both peer clients print: alpha lines as birdctl prints them
("HH:MM:SS.mmm  ADDRESS  alpha  0.42"), counted up to a limit.'''

import sys
import threading
from datetime import datetime


def line(address, data):
    return f'{datetime.now().strftime("%H:%M:%S.%f")[:-3]}  {address}  alpha  {int(bytes(data).decode()) / 100:g}'


class Printer:
    '''Prints notifications until `count` lines in all (0: no limit); `done` is then set.'''

    def __init__(self, address, count, printed=1):
        self.address, self.count, self.printed = address, count, printed
        self.done = threading.Event()

    def __call__(self, data):
        if self.done.is_set():
            return
        # Flushed at once, as birdctl and the floor hand on each wake-up's
        # lines before they sleep: a streaming tool must not hold a line back
        # (block-buffered, Python would do one write per 8 KiB and look cheaper).
        sys.stdout.write(line(self.address, data) + '\n')
        sys.stdout.flush()
        self.printed += 1
        if self.count and self.printed >= self.count:
            self.done.set()
