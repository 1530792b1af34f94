#!/usr/bin/env python3
"""Forward TCP connections from LISTEN_HOST:LISTEN_PORT to TARGET_HOST:TARGET_PORT.

Used by scripts/cluster/kubeflow.sh so that the training operator, confined to a network
namespace of its own, reaches the kube-apiserver that listens on 127.0.0.1 only.
Usage: tcp-forward.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(lhost, lport, thost, tport):
    async def handle(creader, cwriter):
        try:
            treader, twriter = await asyncio.open_connection(thost, tport)
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(pipe(creader, twriter), pipe(treader, cwriter))

    server = await asyncio.start_server(handle, lhost, lport)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
