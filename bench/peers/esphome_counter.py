"""Home Assistant's ESPHome client (aioesphomeapi) subscribed to a proxy's
raw advertisements: prints {"subscribed": true}, then each second the
advertisements received so far, {"at": SECONDS, "count": N}, for SECONDS.

usage: esphome_counter.py PORT SECONDS   (plaintext, on loopback)"""
import asyncio
import json
import sys
import time

from aioesphomeapi import APIClient


async def main(port, seconds):
    client = APIClient('127.0.0.1', port, '')
    await client.connect(login=True)
    count = [0]

    def batch(advertisements):
        count[0] += len(advertisements.advertisements)
    client.subscribe_bluetooth_le_raw_advertisements(batch)
    started = time.monotonic()
    print(json.dumps({'subscribed': True}), flush=True)
    for second in range(1, seconds + 1):
        await asyncio.sleep(started + second - time.monotonic())
        print(json.dumps({'at': second, 'count': count[0]}), flush=True)
    await client.disconnect()


asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
