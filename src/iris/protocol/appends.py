"""Append frames of the iris protocol: a streaming message's text sent as what was added.

A device that asks for the ``append`` feature gets ``message.append {message_id, offset, text}``
in place of each ``message.update`` snapshot that extends what it already has: ``text`` follows
the first ``offset`` units of the message. Offsets count **UTF-16 code units** (a JavaScript
string's ``length``): an emoji outside the BMP counts 2, a combining mark 1, a CJK character 1,
so a Python server and a browser agree without either decoding graphemes.

Both sides of the wire live here, pure:

- ``AppendWriter`` (server, one per device) remembers the text each open message had in the
  last frame *this device* was sent, and turns a snapshot into an append against it — or leaves
  the snapshot as it is when it does not extend that text (a retry or fallback rewrote it) or
  the device has nothing for the message yet (it joined mid-message, or after a ``resume`` or
  ``sync``). After ``message.start`` the device holds the empty text, so a device that follows
  a message from its start gets appends only.
- ``extended`` (device) applies an append to the text it holds, or says that it does not fit.

A ``message.stop`` whose final text extends the text the device was sent carries the rest as
``offset`` + ``text`` (an append that also closes the message) in place of ``final_text``; one
whose final text was rewritten carries ``final_text``, as always.
"""

from __future__ import annotations

from dataclasses import dataclass

from iris.fanout.rules import Frame

FEATURE = "append"
_CLOSERS = frozenset({"message.stop", "message", "commentary"})


def utf16_len(text: str) -> int:
    """``text``'s length in UTF-16 code units (JavaScript's ``string.length``)."""
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate is one unit here and one U+FFFD on the wire.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class Held:
    """A message's text and its length in UTF-16 code units."""

    text: str
    units: int


def held(text: str) -> Held:
    return Held(text, utf16_len(text))


def extended(have: Held | None, offset: int, added: str) -> Held | None:
    """``have`` with ``added`` after its first ``offset`` units; None if it does not fit
    (the device missed or mis-applied a frame: it must ask for ``resume``, not guess)."""
    if have is None or have.units != offset:
        return None
    return Held(have.text + added, have.units + utf16_len(added))


class AppendWriter:
    """One device's side of the conversion: which text of each open message it was sent."""

    def __init__(self) -> None:
        self._sent: dict[str, Held] = {}

    def convert(self, frame: Frame) -> Frame | None:
        """The frame to send in place of ``frame`` (a ``message.append``, or a ``message.stop``
        with the rest of the text); None: send ``frame`` itself.

        Call it for every frame in the order the device is sent them."""
        kind = frame["type"]
        if kind == "sync":
            self.forget()  # the device's view is replaced
            return None
        message_id = frame.get("message_id")
        if not isinstance(message_id, str):
            return None
        if kind == "message.start":
            self._sent[message_id] = Held("", 0)  # the device starts the bubble empty
            return None
        if kind != "message.update":
            if kind not in _CLOSERS:
                return None
            have = self._sent.pop(message_id, None)  # no more appends for it: keep the map small
            if kind == "message.stop" and have is not None:
                return _closing_append(frame, have)
            return None
        text: str = frame["text"]
        have = self._sent.get(message_id)
        if have is None or not _extends(text, have.text):
            self._sent[message_id] = held(text)
            return None
        added = text[len(have.text) :]
        self._sent[message_id] = Held(text, have.units + utf16_len(added))
        return {
            "type": "message.append",
            "message_id": message_id,
            "offset": have.units,
            "text": added,
            "chat_id": frame["chat_id"],
            "seq": frame["seq"],
        }

    def forget(self) -> None:
        """The device's text is no longer known (a ``resume`` or ``sync``): snapshots next."""
        self._sent.clear()

    def __len__(self) -> int:
        return len(self._sent)


def _closing_append(stop: Frame, have: Held) -> Frame | None:
    """The stop with the rest of the text (``offset`` + ``text``) in place of ``final_text``,
    when the final text extends what the device holds: sending it whole again would double
    the bytes of a streamed reply. None: the final text was rewritten; send it whole."""
    final: str = stop["final_text"]
    if not _extends(final, have.text):
        return None
    closing = {key: value for key, value in stop.items() if key != "final_text"}
    closing["offset"] = have.units
    closing["text"] = final[len(have.text) :]
    return closing


def _extends(text: str, before: str) -> bool:
    # A high surrogate at the cut would pair with the next unit in a snapshot, but go out
    # alone (as U+FFFD) in an append: such a cut gets a snapshot instead.
    return text.startswith(before) and not (before and "\ud800" <= before[-1] <= "\udbff")
