"""The Python twins of the web app's pure modules on the case files the node tests read
(``tests/webjs/cases/*.json``): the terminal app's core (``iris.app.core``) and the browser's
modules (``src/iris/web/js``) held to the same cases, each in its own language's units."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from iris.app.core import attach
from iris.app.core.graphemes import boundary_at_or_after, boundary_at_or_before, is_boundary
from iris.app.core.heal import heal
from iris.app.core.mdstream import MarkdownSplitter, make_parser
from iris.app.core.reveal import Reveal, chars_per_second
from iris.app.core.view import ChatView

CASES = Path(__file__).parent / "cases"
FRAME = 1 / 30


def cases(name: str) -> Any:
    return json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))


def text(spec: Any) -> str:
    """A text written as a string, ``{repeat, times}``, or a list of those, joined."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, list):
        return "".join(text(part) for part in spec)
    return str(spec["repeat"]) * int(spec["times"])


# -- view (ChatView) ------------------------------------------------------------------------

VIEW = cases("view")
FIELDS = {"id": "message_id"}


def pick(actual: Any, expected: Any) -> Any:
    """Only the keys the case lists."""
    if isinstance(expected, list):
        items: list[Any] = list(actual) if isinstance(actual, list) else []
        if len(items) != len(expected):
            return actual
        return [pick(a, e) for a, e in zip(items, expected, strict=True)]
    if isinstance(expected, dict) and not isinstance(actual, (str, int, float, type(None))):
        wanted: dict[str, Any] = expected
        if isinstance(actual, dict):
            return {key: pick(actual.get(key), want) for key, want in wanted.items()}
        return {key: pick(getattr(actual, FIELDS.get(key, key)), w) for key, w in wanted.items()}
    return actual


def check_view(view: ChatView, expect: dict[str, Any]) -> None:
    for key, want in expect.items():
        if key == "bubbles":
            assert pick(view.bubbles, want) == want
        elif key == "shown_length":
            index, low, high = want
            assert low <= len(view.bubbles[index].shown) <= high
        elif key == "resync":
            assert view.take_resync() == want
        elif key == "reveal_rate":
            assert view.reveal_rate(want[0]) == want[1]
        else:
            assert key in {"typing", "last_seq", "chat_id", "epoch"}, key
            assert getattr(view, key) == want, key


@pytest.mark.parametrize("case", VIEW["cases"], ids=[c["name"] for c in VIEW["cases"]])
def test_the_view_model_on_the_shared_cases(case: dict[str, Any]) -> None:
    clock = {"now": 100.0}
    view = ChatView(lambda: clock["now"], **case.get("options", {}))
    for step in case["steps"]:
        if "apply" in step:
            for frame in step["apply"]:
                view.apply(frame)
        elif "local" in step:
            view.add_local_user(step["local"])
        elif "run" in step:
            for _ in range(round(step["run"] * 30)):
                clock["now"] += FRAME
                view.tick()
        elif "set_smoothness" in step:
            view.set_smoothness(step["set_smoothness"])
        else:
            check_view(view, step["expect"])  # the twin's, not the browser's (`js`)


# A tick 0.05 s after each frame; BMP text only, so that a reveal's step (code points here,
# UTF-16 units in the browser) is the same length in both.
PIECES = ["a", "word ", "中文", "é", "e\u0301", "\n", " ", "**b", "`c", "日本語 "]
# Values a broken frame puts in a field: a number as text, 1 for true, a fraction, negative,
# empty, null, a list, an object (some of them right for some fields: then both take it).
WRONG: list[Any] = ["5", 1, True, 1.5, -1, "", None, [], {}, "m1"]
PACKAGED_NODE = Path(__file__).parent.parent / "interop" / "node" / "node_modules" / ".bin" / "node"
NODE = str(PACKAGED_NODE) if PACKAGED_NODE.exists() else shutil.which("node")


class Turns:
    """Random turns of valid frames as a server sends them to one device: streamed messages
    (snapshots and appends, some appends lost), stops in both forms, whole messages,
    commentary, tools, errors, a sync now and then, replays of frames already sent, and broken
    frames (a field gone or mistyped, or not an object) that both apps read by one rule."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.seq = 0
        self.sent: dict[str, str] = {}  # message_id -> the text this device was sent
        self.frames: list[Any] = []  # frames as sent, broken ones among them

    def text(self) -> str:
        return "".join(self.random.choice(PIECES) for _ in range(self.random.randint(1, 4)))

    def emit(self, frame: dict[str, Any], scoped: bool = True) -> None:
        if scoped:
            self.seq += 1
            frame = {**frame, "seq": self.seq, "chat_id": "c1"}
        self.frames.append(frame)

    def broken(self, frame: dict[str, Any]) -> Any:
        """A frame with one field gone or of another type (both apps must refuse it whole or
        take it whole, the same way), or not an object at all."""
        r = self.random
        if r.random() < 0.1:
            return r.choice([[frame], "text", 7, None])
        key = r.choice(sorted(frame))
        if r.random() < 0.3:
            return {k: v for k, v in frame.items() if k != key}
        return frame | {key: r.choice(WRONG)}

    def step(self) -> None:
        r, mid = self.random, self.random.choice(["m1", "m2", "m3"])
        have = self.sent.get(mid)
        choice = r.choice([0, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 6, 7, 8, 8, 8, 9, 10, 10, 11, 11, 12])
        if choice == 0:
            self.emit({"type": "typing", "on": r.random() < 0.5})
        elif choice == 1 or (have is None and choice in (2, 3, 4, 5)):
            self.sent[mid] = ""
            self.emit({"type": "message.start", "message_id": mid, "role": "assistant"})
        elif choice == 2 and have is not None:
            now = have + self.text() if r.random() < 0.8 else self.text()  # a rewrite
            self.sent[mid] = now
            self.emit({"type": "message.update", "message_id": mid, "text": now})
        elif choice in (3, 4) and have is not None:
            piece, offset = self.text(), len(have.encode("utf-16-le")) // 2
            lost = r.random() < 0.1
            if not lost:
                self.sent[mid] = have + piece
            self.emit(
                {"type": "message.append", "message_id": mid, "text": piece}
                | {"offset": offset + 3 if lost else offset}
            )
        elif choice == 5 and have is not None:
            del self.sent[mid]
            if r.random() < 0.5:
                offset = len(have.encode("utf-16-le")) // 2
                stop = {"offset": offset, "text": self.text()}
            else:
                stop = {"final_text": have + self.text()}
            self.emit({"type": "message.stop", "message_id": mid, "model": "m", "tokens": 3} | stop)
        elif choice == 6:
            self.sent.pop(mid, None)
            self.emit(
                {"type": "message", "message_id": mid, "role": "assistant", "text": self.text()}
            )
        elif choice == 7:
            self.sent.pop(mid, None)
            self.emit({"type": "commentary", "message_id": mid, "text": self.text()})
        elif choice == 8:
            kind = r.choice(["tool.start", "tool.progress", "tool.end"])
            tool = {"type": kind, "index": r.randint(1, 2), "name": "terminal"}
            extra = {"tool.start": {"preview": "ls", "args": {}}, "tool.progress": {"note": "n"}}
            end = {"ok": r.random() < 0.5, "duration": 0.5, "output_preview": "out"}
            self.emit(tool | extra.get(kind, end))
        elif choice == 9:
            self.emit({"type": "error", "code": "upstream_error", "message": "failed"})
        elif choice == 10 and self.frames:
            self.frames.append(r.choice(self.frames))  # a replay of a frame already sent
        elif choice == 11 and (whole := [f for f in self.frames if isinstance(f, dict)]):
            self.frames.append(self.broken(r.choice(whole)))
        else:
            self.sent.clear()
            messages = [{"message_id": "s1", "role": "user", "text": "q"}]
            self.emit({"type": "sync", "messages": messages, "seq": self.seq}, scoped=False)


def python_views(frames: list[dict[str, Any]], smoothness: float) -> list[dict[str, Any]]:
    clock = {"now": 100.0}
    view = ChatView(lambda: clock["now"], smoothness=smoothness)
    views: list[dict[str, Any]] = []
    for frame in frames:
        view.apply(frame)
        clock["now"] += 0.05
        view.tick()
        bubbles = [
            [b.message_id, b.role, b.kind, b.text, b.shown, b.streaming, b.stopped]
            + [b.reasoning, b.model, b.tokens]
            + [[[t.index, t.name, t.ok, list(t.notes), t.output_preview] for t in b.tools]]
            for b in view.bubbles
        ]
        resync = view.take_resync()
        views.append(
            {"resync": resync, "typing": view.typing, "last_seq": view.last_seq}
            | {"bubbles": bubbles}
        )
    return views


@pytest.mark.skipif(NODE is None, reason="node is not installed (the browser's twin runs on it)")
def test_random_turns_leave_both_views_the_same_after_every_frame() -> None:
    turns: list[list[dict[str, Any]]] = []
    for seed in range(150):
        made = Turns(seed)
        for _ in range(made.random.randint(1, 40)):
            made.step()
        turns.append(made.frames)
    payload = json.dumps({"smoothness": 0.4, "turns": turns})
    assert NODE is not None
    script = Path(__file__).parent / "twin_view.mjs"
    done = subprocess.run(
        [NODE, str(script)], input=payload, capture_output=True, text=True, timeout=60, check=True
    )
    for seed, (frames, js) in enumerate(zip(turns, json.loads(done.stdout), strict=True)):
        python = python_views(frames, 0.4)
        for step, (want, got) in enumerate(zip(python, js, strict=True)):
            assert got == want, f"seed {seed}, after frame {step}: {frames[step]}"


# -- reveal ----------------------------------------------------------------------------------

REVEAL = cases("reveal")


def near(actual: float, want: float | list[float]) -> bool:
    value, tolerance = (want[0], want[1]) if isinstance(want, list) else (want, 0)
    return abs(actual - value) <= tolerance


def test_smoothness_maps_to_the_shared_rates() -> None:
    for smoothness, rate in REVEAL["rates"]:
        assert chars_per_second(smoothness) == pytest.approx(rate)


@pytest.mark.parametrize("case", REVEAL["cases"], ids=[c["name"] for c in REVEAL["cases"]])
def test_the_reveal_on_the_shared_cases(case: dict[str, Any]) -> None:
    reveal, now, mark = Reveal(case["smoothness"], now=0.0), 0.0, 0
    for step in case["steps"]:
        if "push" in step:
            reveal.push(text(step["push"]), now=now)
        elif "play" in step:
            until = now + step["play"]
            while now < until - 1e-9:
                now += FRAME
                reveal.tick(now)
        elif "set_smoothness" in step:
            reveal.set_smoothness(step["set_smoothness"])
        elif "mark" in step:
            mark = reveal.shown
        else:
            want = step["expect"]
            assert "shown" not in want or near(reveal.shown, want["shown"]), reveal.shown
            assert "advanced" not in want or near(reveal.shown - mark, want["advanced"])
            assert want.get("text", reveal.text) == reveal.text
            assert want.get("jumps", reveal.jumps) == reveal.jumps
            assert want.get("caught_up", reveal.caught_up) == reveal.caught_up


# -- graphemes -------------------------------------------------------------------------------

GRAPHEMES = cases("graphemes")


@pytest.mark.parametrize("cluster", [c[0] for c in GRAPHEMES["clusters"]])
def test_no_cut_inside_a_shared_cluster(cluster: str) -> None:
    joined = f"a{cluster}{cluster}b"
    bounds = [0, 1, 1 + len(cluster), 1 + 2 * len(cluster), len(joined)]
    assert [i for i in range(len(joined) + 1) if is_boundary(joined, i)] == bounds
    assert boundary_at_or_before(joined, 2) == 1
    assert boundary_at_or_after(joined, 2) == 1 + len(cluster)


@pytest.mark.parametrize("parts", [r[0] for r in GRAPHEMES["runs"]])
def test_the_boundaries_of_a_shared_run(parts: list[str]) -> None:
    ends = [0]
    for part in parts:
        ends.append(ends[-1] + len(part))
    joined = "".join(parts)
    assert [i for i in range(len(joined) + 1) if is_boundary(joined, i)] == ends


# -- mdstream --------------------------------------------------------------------------------

MDSTREAM = cases("mdstream")
MD = make_parser()


def html(splitter: MarkdownSplitter) -> str:
    def render(tokens: object) -> str:
        return MD.renderer.render(list(tokens), MD.options, {})  # type: ignore[call-overload]

    return "".join(render(b.tokens) for b in splitter.settled) + render(splitter.tail_tokens)


def test_every_shared_block_streams_as_it_parses_whole() -> None:
    for block in MDSTREAM["blocks"]:
        for gap in MDSTREAM["gaps"]:
            doc = block + gap + block
            splitter = MarkdownSplitter()
            for char in doc:
                splitter.append(char)
                assert html(splitter) == MD.render(splitter.source)


def test_the_shared_list_streamed_by_character_stays_one_list() -> None:
    splitter = MarkdownSplitter()
    for char in MDSTREAM["one_list"]:
        splitter.append(char)
    assert html(splitter).count("<ol>") == 1


def test_the_shared_settled_sources() -> None:
    settled = MDSTREAM["settled"]
    splitter = MarkdownSplitter()
    for chunk in settled["appends"]:
        splitter.append(chunk)
    assert [b.source for b in splitter.settled] == settled["sources"]
    before = splitter.parsed_chars
    splitter.append(settled["then"])
    assert splitter.parsed_chars - before == len(splitter.tail)


# -- heal ------------------------------------------------------------------------------------

HEAL = cases("heal")


@pytest.mark.parametrize("case", HEAL["cases"], ids=[repr(c["in"]) for c in HEAL["cases"]])
def test_the_terminal_heals_a_tail_as_the_browser_does(case: dict[str, Any]) -> None:
    assert heal(case["in"]) == case["ours"]


HEAL_PIECES = ["*", "**", "_", "__", "~~", "`", "``", "[", "](", "http", ")", "!", "\\", "a", "é"]
HEAL_PIECES += [" ", "\n", "-", "=", "- ", "```", "\n\n", "2", "中", "𝐀", "😀"]


@pytest.mark.skipif(NODE is None, reason="node is not installed (the browser's twin runs on it)")
def test_random_tails_heal_the_same_in_both() -> None:
    """Astral characters included: a letter outside the BMP (𝐀) is a word character in both."""
    rng = random.Random(7)
    tails = [
        "".join(rng.choice(HEAL_PIECES) for _ in range(rng.randint(1, 12))) for _ in range(3000)
    ]
    assert NODE is not None
    module = Path(__file__).parents[2] / "src" / "iris" / "web" / "js" / "heal.js"
    script = (
        f"import {{ heal }} from {json.dumps(module.as_uri())};"
        "let data = ''; process.stdin.on('data', (c) => { data += c; });"
        "process.stdin.on('end', () => process.stdout.write("
        "JSON.stringify(JSON.parse(data).map(heal))));"
    )
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", script],
        input=json.dumps(tails),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for tail, js in zip(tails, json.loads(done.stdout), strict=True):
        assert heal(tail) == js, tail


# -- attach ----------------------------------------------------------------------------------


def test_the_terminal_app_attaches_with_the_browsers_caps_and_words() -> None:
    """``iris.app.core.attach`` is the twin of ``js/attach.js``: the same caps, the same lines."""
    source = (Path(__file__).parents[2] / "src" / "iris" / "web" / "js" / "attach.js").read_text()
    caps = dict(re.findall(r"export const (MAX_\w+) = ([\d_]+(?: - [\d_]+)?);", source))
    values = {name: [int(n.replace("_", "")) for n in v.split(" - ")] for name, v in caps.items()}
    assert {name: n[0] - sum(n[1:]) for name, n in values.items()} == {
        "MAX_EDGE": attach.MAX_EDGE,
        "MAX_FILES": attach.MAX_FILES,
        "MAX_FRAME_B64": attach.MAX_FRAME_B64,
    }
    assert "`${name}: at most ${MAX_FILES} files a message`" in source
    assert "${name}: too large to send (${Math.ceil(blob.size / 1024)} KB; " in source
    assert "a message carries about ${Math.floor(MAX_FRAME_B64 * 0.75 / 1024)} KB)" in source
