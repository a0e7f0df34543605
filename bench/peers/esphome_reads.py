"""Home Assistant reading a characteristic through a proxy, RUNS times, as
it reconnects (bleak-esphome 1.0.0 over aioesphomeapi 23.0.0, the services
kept after the first link): connect, read, disconnect, each run's wall time
from the connect to the link's end, 0.3 s apart; the API connection made once. Prints
{"ms": [...], "value": HEX} (the first run, which asks for the services,
is left out of "ms").

usage: esphome_reads.py PORT ADDRESS CHARACTERISTIC_UUID RUNS   (plaintext, on loopback)"""
import asyncio
import contextlib
import json
import sys
import time

from aioesphomeapi import APIClient
from bleak.backends.device import BLEDevice
from bleak_esphome.backend.cache import ESPHomeBluetoothCache
from bleak_esphome.backend.client import ESPHomeClient, ESPHomeClientData
from bleak_esphome.backend.device import ESPHomeBluetoothDevice


class Scanner:
    connecting = staticmethod(contextlib.nullcontext)


async def main(port, address, uuid, runs):
    api = APIClient('127.0.0.1', port, '')
    await api.connect(login=True)
    info = await api.device_info()
    device = ESPHomeBluetoothDevice(info.name, info.mac_address, available=True)
    slots = asyncio.get_running_loop().create_future()

    def free(free, limit):
        device.async_update_ble_connection_limits(free, limit)
        slots.done() or slots.set_result(None)
    api.subscribe_bluetooth_connections_free(free)
    await asyncio.wait_for(slots, 10)
    data = ESPHomeClientData(bluetooth_device=device, cache=ESPHomeBluetoothCache(), client=api, device_info=info,
                             api_version=api.api_version, title=info.name, scanner=Scanner())
    ble_device = BLEDevice(address, None, {'source': info.mac_address, 'address_type': 1}, -60)
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
