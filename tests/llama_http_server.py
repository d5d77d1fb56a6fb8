"""A genuine llama.cpp HTTP server (xllamacpp's, the one the local_gguf provider runs in-process) for a packaged
model, in its own process on loopback: ``python tests/llama_http_server.py MODEL [SLOTS]`` prints its address
(``http://127.0.0.1:PORT``) on one line and serves until its stdin closes (or, from a terminal, until it is killed). tests/test_pool_http_e2e.py builds a
pool of ``openai`` workers on two of them."""

from __future__ import annotations

import signal
import sys

import xllamacpp

from openconductor.providers.local_gguf import resolve_model


def main(model: str, slots: int = 2, ctx_per_slot: int = 4096) -> None:
    path, _chat = resolve_model(model)
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_parallel = slots
    params.n_ctx = slots * ctx_per_slot  # llama.cpp splits the context across slots
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1  # a shared 2-core machine (docs/providers.md)
    params.warmup = False
    params.verbosity = -1
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, chosen by the server
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    if sys.stdin.isatty():  # started by hand (`... &` in a shell): reading the terminal would stop the job
        signal.pause()
    else:
        sys.stdin.read()  # serve until the parent closes our stdin (or dies)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:3]))
