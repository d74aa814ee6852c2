"""The README's quickstart: three IDs, a batch, a parse, then exit.

NATS_URL=nats://127.0.0.1:4222 python quickstart.py
"""

import asyncio
import os

import uid_dispenser


async def main() -> None:
    url = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
    async with uid_dispenser.connect(url) as client:
        for _ in range(3):
            print(await client.next())
        ids = await client.batch(1000)
        print(f"batch of {len(ids)}: {ids[0]} .. {ids[-1]}")
        parts = await client.parse(ids[0])
        print(f"{ids[0]} = {uid_dispenser.to_base32(ids[0])}: worker {parts.worker_id}, sequence {parts.sequence}, {parts.time}")


asyncio.run(main())
