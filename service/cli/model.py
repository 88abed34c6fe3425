"""`rag model serve`: an embedded catalog model as llama.cpp's OpenAI-compatible server, in the foreground.
Served once, the model is shared by every process (each would otherwise load its own copy, ~40 s each) and
reached as any endpoint (`RAG_LLM_PROVIDER=openai`).
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from service.cli.common import console, fail, settings_or_exit, user_errors

if TYPE_CHECKING:
    from models.local_catalog import LocalModel, LocalModelName
    from models.local_llm import LocalLLMServer

model_app = typer.Typer(
    help="Embedded models: serve one as an OpenAI-compatible endpoint.", no_args_is_help=True
)

#: Port of `rag model serve` by default (llama.cpp's `llama-server` default too; `rag serve` uses 8000).
DEFAULT_PORT = 8080
#: Only this machine can reach the server by default: it has no authentication unless --api-key is given.
DEFAULT_HOST = "127.0.0.1"
#: Environment variable that can give --api-key (a key on the command line shows in `ps`).
API_KEY_ENV = "RAG_MODEL_SERVE_API_KEY"
#: Host names that mean "this machine only", besides loopback IP addresses.
LOOPBACK_NAMES = frozenset({"localhost"})
#: Addresses that listen on every interface: clients on this machine reach them through loopback.
ANY_ADDRESSES = frozenset({"0.0.0.0", "::"})
#: Smallest context window accepted (RAG_LOCAL_N_CTX's floor).
MIN_CONTEXT = 512
#: Seconds between checks of the stop flag while serving (signals interrupt the wait anyway).
STOP_POLL_S = 1.0
#: Signals that stop the server cleanly: Ctrl-C and a service manager's stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


ServedModelOption = Annotated[
    str | None,
    typer.Option(help="Catalog model (models/local_catalog.py); default: the strongest installed."),
]
HostOption = Annotated[
    str,
    typer.Option(
        help="Address to listen on. Loopback only unless --allow-remote: the server runs the model for "
        "anyone who reaches the port, with no authentication unless --api-key is given."
    ),
]
AllowRemoteOption = Annotated[
    bool,
    typer.Option(
        "--allow-remote",
        help="Allow a non-loopback --host: other machines can then use the model (and this machine's "
        "CPU); give --api-key too.",
    ),
]
ApiKeyOption = Annotated[
    str,
    typer.Option(
        envvar=API_KEY_ENV,
        help=f"Require this key from clients (Authorization: Bearer KEY); ${API_KEY_ENV} keeps it out of "
        "the process list.",
    ),
]


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to any interface


def install_command(name: str) -> str:
    """The command that installs a catalog model with this interpreter."""
    python = Path(sys.executable)
    try:
        python = python.relative_to(Path.cwd())
    except ValueError:
        pass
    return f"{shlex.quote(str(python))} -m models.local_catalog install {name}"


def choose_model(name: str | None) -> LocalModelName:
    """The catalog model to serve: `name` when known and installed, else the strongest installed one."""
    from models.local_catalog import CATALOG, STRONGEST_FIRST, catalog_name, is_installed

    if name is None:
        installed = [model for model in STRONGEST_FIRST if is_installed(model)]
        if not installed:
            fail(f"no embedded model is installed: run `{install_command(STRONGEST_FIRST[0])}`")
        return installed[0]
    known = catalog_name(name)
    if known is None:
        fail(f"unknown model {name!r}: choose one of {', '.join(CATALOG)}")
    if not is_installed(known):
        fail(f"the embedded model {known} is not installed: run `{install_command(known)}`")
    return known


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (TIME_WAIT counts as free, as for llama.cpp)."""
    if port == 0:
        return False
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def client_base_url(listening_url: str) -> str:
    """The base URL a client on this machine uses: an any-interface address (0.0.0.0) becomes loopback."""
    for address in ANY_ADDRESSES:
        listening_url = listening_url.replace(f"//{address}:", f"//{DEFAULT_HOST}:")
        listening_url = listening_url.replace(f"//[{address}]:", f"//{DEFAULT_HOST}:")
    return listening_url


def engine_settings(base_url: str, model: str, api_key: str) -> list[str]:
    """The environment lines that point the engine at the served model."""
    lines = {
        "RAG_LLM_PROVIDER": "openai",
        "RAG_LLM_BASE_URL": base_url,
        "RAG_LLM_MODEL": model,
    }
    if api_key:
        lines["RAG_LLM_API_KEY"] = api_key
    return [f"export {name}={shlex.quote(value)}" for name, value in lines.items()]


def wait_until_stopped() -> None:
    """Block until Ctrl-C or SIGTERM (the server runs in xllamacpp's threads), then restore the handlers; the
    main thread only waits, so a signal ends the wait and the caller stops the server mid-request cleanly."""
    stop = threading.Event()
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    for number in STOP_SIGNALS:
        signal.signal(number, lambda *_: stop.set())
    try:
        while not stop.wait(STOP_POLL_S):
            pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@model_app.command("serve")
def model_serve(
    model: ServedModelOption = None,
    host: HostOption = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to listen on (0 = any free port).")] = DEFAULT_PORT,
    threads: Annotated[
        int | None, typer.Option(help="CPU threads of the model (default RAG_LOCAL_THREADS).")
    ] = None,
    ctx: Annotated[
        int | None, typer.Option(help="Context window in tokens (default RAG_LOCAL_N_CTX).")
    ] = None,
    allow_remote: AllowRemoteOption = False,
    api_key: ApiKeyOption = "",
) -> None:
    """Serve an embedded model as llama.cpp's OpenAI-compatible server until Ctrl-C or SIGTERM, and print
    the settings that point the engine (or any OpenAI client) at it."""
    from models.local_catalog import CATALOG, find_model_file
    from models.local_llm import LocalLLMServer

    if not is_loopback(host) and not allow_remote:
        fail(
            f"--host {host} is reachable from other machines: add --allow-remote (and --api-key) to serve it"
        )
    if not 0 <= port <= 65535:
        fail(f"--port {port} is not a port (0-65535)")
    settings = settings_or_exit()
    threads = settings.local_threads if threads is None else threads
    ctx = settings.local_n_ctx if ctx is None else ctx
    if threads < 1:
        fail(f"--threads {threads} must be at least 1")
    if ctx < MIN_CONTEXT:
        fail(f"--ctx {ctx} must be at least {MIN_CONTEXT}")
    name = choose_model(model)
    if port_in_use(host, port):
        fail(f"port {port} on {host} is in use: stop what listens there or pick another --port")
    entry = CATALOG[name]
    console.print(f"loading {escape(entry.description)} ...", highlight=False)
    with user_errors():
        server = LocalLLMServer(
            find_model_file(entry.name),
            n_ctx=ctx,
            threads=threads,
            alias=entry.name,
            chat_template=entry.chat_template,
            host=host,
            port=port,
            api_key=api_key,
        )
        server.start()
    try:
        _print_serving(server, entry, threads=threads, ctx=ctx, api_key=api_key)
        wait_until_stopped()
    finally:
        server.stop()
    console.print("stopped", highlight=False)


def _print_serving(
    server: LocalLLMServer, entry: LocalModel, *, threads: int, ctx: int, api_key: str
) -> None:
    """Say what is served where, and print the settings that point the engine (or any OpenAI client) at it."""
    base_url = client_base_url(server.base_url)
    console.print(
        f"serving {entry.name} at {base_url} (loaded in {server.load_seconds or 0:.1f} s, "
        f"{threads} threads, context {ctx}, pid {os.getpid()})",
        highlight=False,
        soft_wrap=True,
    )
    console.print("point the engine at it (shell, or .env):", highlight=False)
    for line in engine_settings(base_url, entry.name, api_key):
        console.print(escape(line), highlight=False, soft_wrap=True)
    console.print("Ctrl-C stops the server.", highlight=False)
