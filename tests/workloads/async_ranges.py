"""nsyswrap.annotate on coroutines and without parentheses, under nsys: two coroutines on
one thread, the first started ending first (10 ms against 30 ms), then a plain function."""

import asyncio
import time

import nsyswrap


@nsyswrap.annotate(domain="e2e")
async def short():
    await asyncio.sleep(0.01)


@nsyswrap.annotate("long", domain="e2e")
async def long_one():
    await asyncio.sleep(0.03)


@nsyswrap.annotate
def bare(x):
    time.sleep(0.005)
    return x * 2


async def main():
    await asyncio.gather(short(), long_one())


asyncio.run(main())
assert bare(3) == 6
print("async_ranges: done", flush=True)
