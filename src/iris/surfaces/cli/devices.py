"""``iris devices add|list|revoke``: pair a phone or browser with the iris socket.

``add NAME`` makes a device token (``iris.state.devices``), prints the pairing URL
``http://<server.host>:<server.port>/#token=<token>`` (``--url BASE`` for a reverse proxy's
address), the same URL as a QR code drawn in the terminal, and the token itself: the only time
it is shown. The token rides in the URL's fragment, which a browser never sends to a server, so
it stays out of request lines and proxy logs; the web app reads it from there and keeps it.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import sys
import time
from typing import TextIO
from urllib.parse import urlsplit

import qrcode
from qrcode.constants import ERROR_CORRECT_L

from iris.config import Config
from iris.errors import DeviceError
from iris.state.devices import Devices, devices_for
from iris.state.fingerprint import shared_store
from iris.state.push import PushSubscriptions, push_subscriptions_for, short
from iris.state.sqlite import Store
from iris.surfaces.origin import is_loopback
from iris.surfaces.socket.access import REVOCATION_POLL

QR_BORDER = 2  # modules of quiet zone; scanners want some, a terminal has little room
# Two modules a character cell: (top light, bottom light) -> the half block that lights them.
_HALVES = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}
_LIGHT_ON_DARK = ("\x1b[97;40m", "\x1b[0m")  # so light modules are light on any theme


def run_devices(
    config: Config, args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    base = pairing_base(config, args.url) if args.action == "add" else ""
    store = Store(config.store.resolved_path(), busy_timeout=config.store.busy_timeout)
    shared = None
    try:
        shared = shared_store(config)
        devices = devices_for(store, shared)
        if args.action == "add":
            token = devices.add(args.name)
            _show_pairing(args.name.strip(), f"{base}/#token={token}", token, out)
            for note in pairing_notes(config, args.url):
                print(f"iris: {note}", file=err)
        elif args.action == "list":
            _show_list(devices, out)
        elif args.action in ("push", "unpush"):
            subscriptions = push_subscriptions_for(store, shared)
            return asyncio.run(_push(subscriptions, getattr(args, "id", None), out))
        else:
            devices.revoke(args.name)
            print(
                f"Revoked {args.name.strip()!r}: its token is refused from now on; if it is "
                f"connected to a running server, it is disconnected within {REVOCATION_POLL:g} s.",
                file=out,
            )
    finally:
        if shared is not None:
            shared.close()
        store.close()
    return 0


# -- the pairing URL -------------------------------------------------------------------------
def pairing_base(config: Config, url: str | None) -> str:
    """Where a device finds this server: ``--url`` as given, else from ``server.host``/``port``."""
    if url is not None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise DeviceError(f"--url must be an http:// or https:// address, not {url!r}")
        if parts.query or parts.fragment:
            raise DeviceError("--url is the base address: no ?query or #fragment")
        return url.strip().rstrip("/")
    host = _reachable_host(config.server.host)
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{config.server.port}"


def pairing_notes(config: Config, url: str | None) -> list[str]:
    """What a user should know about the URL printed (stderr): it may not reach a phone."""
    notes: list[str] = []
    if not config.platforms.iris.enabled:
        notes.append(
            "platforms.iris.enabled is false: iris serve opens no iris socket for the device"
        )
    host = config.server.host if url is None else (urlsplit(url.strip()).hostname or "")
    if url is None and is_loopback(host):
        notes.append(
            f"server.host is {host}: only this machine can open that URL. For a phone, set "
            "server.host to this machine's LAN address, or put Iris behind a TLS reverse "
            "proxy and pass --url https://your.name (see docs/web.md)"
        )
    elif not is_loopback(host) and (url is None or url.strip().lower().startswith("http:")):
        notes.append(
            "the URL is plain http: the token crosses the network readable; on a network you "
            "do not trust, use a TLS reverse proxy and --url https://… (see docs/security.md)"
        )
    return notes


def _reachable_host(host: str) -> str:
    """``host``, or for an any-address bind (0.0.0.0, ::) this machine's LAN address."""
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host
    return _lan_address(ipv6=":" in host) if unspecified else host


def _lan_address(*, ipv6: bool) -> str:
    # Connecting a UDP socket sends nothing; it only asks the kernel which address it would
    # use for the route to a (documentation-range) public address.
    family, probe = (socket.AF_INET6, "2001:db8::1") if ipv6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe_socket:
            probe_socket.connect((probe, 9))
            return str(probe_socket.getsockname()[0])
    except OSError:
        return "::1" if ipv6 else "127.0.0.1"


# -- the QR code -----------------------------------------------------------------------------
def qr_lines(data: str) -> list[str]:
    """``data`` as a QR code in half blocks: light modules drawn, dark ones left blank (a dark
    background), two rows of modules per line."""
    code = qrcode.QRCode(border=QR_BORDER, error_correction=ERROR_CORRECT_L)
    code.add_data(data)
    code.make(fit=True)
    dark: list[list[bool]] = code.get_matrix()
    rows = [[not module for module in row] for row in dark]  # True: light
    if len(rows) % 2:
        rows.append([True] * len(rows[0]))  # quiet zone below
    return [
        "".join(_HALVES[(top, bottom)] for top, bottom in zip(upper, lower, strict=True))
        for upper, lower in zip(rows[::2], rows[1::2], strict=True)
    ]


def _show_pairing(name: str, url: str, token: str, out: TextIO) -> None:
    start, end = _LIGHT_ON_DARK if out.isatty() else ("", "")
    print(f"Paired {name!r}. Open this address on the device, or scan the code:\n", file=out)
    print(f"  {url}\n", file=out)
    for line in qr_lines(url):
        print(f"  {start}{line}{end}", file=out)
    print(f"\nIts token (shown only now; Iris keeps only a hash of it):\n\n  {token}", file=out)


def _show_list(devices: Devices, out: TextIO) -> None:
    paired = devices.devices()
    if not paired:
        print("No paired devices. Pair one with `iris devices add NAME`.", file=out)
        return
    rows = [("NAME", "CREATED", "LAST SEEN")]
    rows += [
        (d.name, _when(d.created), "never" if d.last_seen is None else _when(d.last_seen))
        for d in paired
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, created, seen in rows:
        print(f"{name.ljust(width)}  {created.ljust(16)}  {seen}", file=out)


async def _push(subscriptions: PushSubscriptions, remove: str | None, out: TextIO) -> int:
    """``iris devices push``: the Web Push subscriptions; ``unpush ID``: drop one."""
    if remove is not None:
        if not await subscriptions.remove(remove):
            print(f"No push subscription {remove!r} (see `iris devices push`).", file=out)
            return 1
        print(f"Removed push subscription {remove!r}: no more notifications there.", file=out)
        return 0
    found = await subscriptions.listed()
    if not found:
        print("No push subscriptions (the web app asks after its first reply).", file=out)
        return 0
    print("ID            DEVICE  CHAT  SINCE  PUSH SERVICE", file=out)
    for s in found:
        host = urlsplit(s.endpoint).hostname or "?"
        print(f"{short(s)}  {s.device}  {s.chat}  {_when(s.created)}  {host}", file=out)
    return 0


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))
