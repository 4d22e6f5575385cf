"""The ``iris`` command: chat, serve, app, devices, mcp. Expected failures print one line and exit non-zero."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from iris import __version__
from iris.errors import IrisError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iris", description="Iris: a streaming-first agent gateway"
    )
    parser.add_argument("--version", action="version", version=f"iris {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="chat in the terminal (streamed)")
    chat.add_argument("-q", "--query", help="one prompt: print the reply and exit")
    chat.add_argument("--config", help="config file (default: $IRIS_CONFIG or ~/.iris/config.yaml)")

    serve = sub.add_parser("serve", help="run the server: API, iris WebSocket, chat platforms")
    serve.add_argument("--config", help="config file")
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="server processes on the one port (N > 1 needs store.url: redis://…)",
    )

    app = sub.add_parser("app", help="the terminal app for the iris protocol")
    app.add_argument("--config", help="config file")
    app.add_argument("--url", default=None, help="ws://127.0.0.1:8642/iris/ws")
    app.add_argument("--token", default=None, help="device token")
    app.add_argument("--chat", default=None, help="chat id")

    devices = sub.add_parser("devices", help="pair devices with the iris socket (the web app)")
    actions = devices.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="pair a device: prints a pairing URL, a QR code, a token")
    add.add_argument("name", help="what to call the device, e.g. phone")
    add.add_argument(
        "--url",
        default=None,
        metavar="BASE",
        help="the address the device opens, e.g. https://iris.example.com behind a reverse proxy "
        "(default: http://server.host:server.port)",
    )
    mcp = sub.add_parser(
        "mcp", help="MCP: serve Iris's chats as tools (serve), sign in to a server (login)"
    )
    modes = mcp.add_subparsers(dest="action", required=True)
    mcp_serve = modes.add_parser("serve", help="serve MCP on stdin/stdout (no port, no token)")
    mcp_serve.add_argument("--config", help="config file")
    login = modes.add_parser("login", help="sign in to an MCP server with auth: oauth")
    logout = modes.add_parser("logout", help="forget an MCP server's sign-in (its tokens)")
    for action in (login, logout):
        action.add_argument("name", help="the server's name under mcp_servers")
        action.add_argument("--config", help="config file")

    listing = actions.add_parser("list", help="paired devices: name, created, last seen")
    revoke = actions.add_parser("revoke", help="refuse a device's token from now on")
    revoke.add_argument("name")
    push = actions.add_parser("push", help="Web Push subscriptions: id, device, chat, service")
    unpush = actions.add_parser("unpush", help="drop a Web Push subscription (its id)")
    unpush.add_argument("id")
    for action in (add, listing, revoke, push, unpush):
        action.add_argument("--config", help="config file")
    return parser


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except IrisError as exc:
        print(f"iris: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from iris.config import load_config
    from iris.private import secure_existing

    if args.command == "app":
        from iris.app.main import run_app

        secure_existing()
        return run_app(args)
    config = load_config(args.config)
    secure_existing(
        config=Path(config.source) if config.source else None,
        database=config.store.resolved_path(),
    )
    if args.command == "devices":
        from iris.surfaces.cli.devices import run_devices

        return run_devices(config, args)
    if args.command == "mcp" and args.action in ("login", "logout"):
        from iris.surfaces.cli.mcp_login import run_login, run_logout

        return (run_login if args.action == "login" else run_logout)(config, args.name)
    if args.command == "mcp":
        from iris.surfaces.mcp_server.serve_stdio import run_stdio

        return run_stdio(config)
    if args.command == "serve":
        if args.workers > 1:
            from iris.server.workers import serve_workers

            serve_workers(config, args.workers)
            return 0
        from iris.server.asgi import serve

        serve(config)
        return 0
    if args.query is not None:
        from iris.surfaces.cli.oneshot import run_oneshot

        return run_oneshot(config, args.query)
    from iris.surfaces.cli.repl import run_repl

    return run_repl(config)


if __name__ == "__main__":
    raise SystemExit(main())
