"""Start a whole deployment on this machine and keep it running until Ctrl-C: PostgreSQL (the shared
trace store), Redis (the shared per-key counters), N `conductor serve` replicas with W worker
processes each, and nginx in front of them (when installed).

    PYTHONPATH=src python deploy/local_stack.py --config examples/server.toml --replicas 2 --workers 2 --port 8000

Everything listens on 127.0.0.1; the database and Redis trust local connections (a development stack:
deploy/compose.yaml is the shape of a real one). State lives in --dir (default: a new temp dir).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from stack import ServiceUnavailable, Stack  # deploy/stack.py: this script's directory is on sys.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("examples/server.toml"), help="server config every replica serves")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="server processes per replica")
    parser.add_argument("--port", type=int, default=8000, help="nginx's port (the front door)")
    parser.add_argument("--dir", type=Path, help="where the database and logs live (default: a new temp dir)")
    parser.add_argument("--check", action="store_true", help="start, print the URLs, check /health through the front, stop")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="openconductor-stack-"))
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)  # the database runs as nobody when this runs as root
    with Stack(directory) as stack:
        try:
            traces, counters = stack.postgres(), stack.redis()
        except ServiceUnavailable as exc:
            sys.exit(f"error: {exc}")
        replicas = [stack.server(args.config.resolve(), name=f"replica-{i}", workers=args.workers, traces=traces, counters=counters)
                    for i in range(args.replicas)]
        try:
            front = stack.nginx(replicas, port=args.port)
        except ServiceUnavailable as exc:
            front = replicas[0]
            print(f"note: {exc}; use the replicas directly")
        print(f"trace store  {traces}\ncounters     {counters}")
        for i, url in enumerate(replicas):
            print(f"replica {i}    {url}  ({args.workers} processes)")
        print(f"front door   {front}   (OpenAI base URL: {front}/v1; viewer: {front}/)\nlogs         {directory}")
        if args.check:
            import httpx

            seen = {httpx.get(front + "/health", timeout=5).json()["pid"] for _ in range(8 * args.replicas * args.workers)}
            print(f"health through the front door: ok, answered by {len(seen)} server processes")
            if args.dir is None:
                import shutil

                stack.close()
                shutil.rmtree(directory, ignore_errors=True)
            return
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while all(p.poll() is None for _, p in stack.processes):
                time.sleep(1)
            print("a service exited; stopping the stack (see its log in the directory above)")
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
