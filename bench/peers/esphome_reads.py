"""Home Assistant reading a characteristic through a proxy, RUNS times, as
it reconnects (bleak-esphome 1.0.0 over aioesphomeapi 23.0.0, the services
kept after the first link): connect, read, disconnect, each run's wall time
from the connect to the link's end, 0.3 s apart; the API connection made once. Prints
{"ms": [...], "value": HEX} (the first run, which asks for the services,
is left out of "ms").

usage: esphome_reads.py PORT ADDRESS CHARACTERISTIC_UUID RUNS   (plaintext, on loopback)"""
import asyncio
import json
import os
import sys
import time

from aioesphomeapi import APIClient
from bleak_esphome.backend.client import ESPHomeClient

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../fixtures/proxy'))
from esphome_connect import linkable  # noqa: E402


async def main(port, address, uuid, runs):
    api = APIClient('127.0.0.1', port, '')
    await api.connect(login=True)
    _, data, ble_device = await linkable(api, address, [])
    device = data.bluetooth_device
    times, value = [], None
    for _ in range(runs + 1):
        client = ESPHomeClient(ble_device, client_data=data)
        started = time.monotonic()
        await client.connect(timeout=20)
        value = (await client.read_gatt_char(uuid)).hex()
        await client.disconnect()
        times.append((time.monotonic() - started) * 1000)
        while device.ble_connections_free < 1:  # the slot given back
            await asyncio.sleep(0.01)
        # Past the scheduler's gap between connection attempts (100-200 ms),
        # which a read alone does not meet.
        await asyncio.sleep(0.3)
    print(json.dumps({'ms': times[1:], 'value': value}), flush=True)
    await api.disconnect()


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])))
