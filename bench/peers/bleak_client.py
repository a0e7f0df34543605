'''bleak doing what birdctl does, written as a bleak user would:
    bleak_client.py read  ADDRESS UUID
    bleak_client.py watch ADDRESS UUID COUNT   (COUNT 0: until killed)
    bleak_client.py scan - SERVICE_UUID SECONDS (each device advertising it, as found)
BLEAK_ADAPTER=hciN: that adapter rather than bleak's default (the VM's system bench).
Prints alpha lines as birdctl does ("HH:MM:SS.mmm  ADDRESS  alpha  0.42").'''

import asyncio
import os
import sys

from bleak import BleakClient, BleakScanner

from lines import Printer, line


async def main(mode, address, uuid, count):
    adapter = {'bluez': {'adapter': os.environ['BLEAK_ADAPTER']}} if 'BLEAK_ADAPTER' in os.environ else {}
    if mode == 'scan':
        return await scan(uuid, count, adapter)
    device = await BleakScanner.find_device_by_address(address, timeout=10, **adapter)
    if device is None:
        sys.exit(f'bleak: {address} not found')
    async with BleakClient(device, **adapter) as client:
        print(line(address, await client.read_gatt_char(uuid)), flush=True)  # as birdctl hands on its first line at once
        if mode == 'read':
            return
        printer = Printer(address, count)
        finished = asyncio.Event()  # bleak calls back on the event loop: no polling

        def notified(_, data):
            printer(data)
            if printer.done.is_set():
                finished.set()
        await client.start_notify(uuid, notified)
        await finished.wait()
        sys.stdout.flush()


async def scan(service, seconds, adapter):
    '''Prints each device advertising `service` once, as it is found (as `birdctl scan` does).'''
    seen = set()

    def found(device, advertisement):
        if device.address not in seen:
            seen.add(device.address)
            print(f'{device.address}  {advertisement.rssi} dBm   {advertisement.local_name or ""}', flush=True)
    async with BleakScanner(found, service_uuids=[service], **adapter):
        await asyncio.sleep(seconds)
    if not seen:
        sys.exit(6)


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0))
