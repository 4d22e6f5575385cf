"""The embedded provider's pieces that need no model: the GGUF header reader that decides
between the model's chat template and the plain prompt, the one line a crashed model process
gets, and ``model.local``."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.config import config_from_dict
from iris.errors import ConfigError, LocalModelCrashed, ProviderError, user_message
from iris.llm import gguf
from iris.llm.local import crash_cause, default_threads, template_messages, usable_cores
from tests.agent.gguf_files import header, string_kv, token_array_kv, u32_kv

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@given(
    before=st.lists(st.tuples(texts, texts), max_size=4),
    tokens=st.lists(texts, max_size=20),
    template=st.none() | texts.filter(bool),
)
def test_the_chat_template_is_found_among_any_other_keys(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[str, str]],
    tokens: list[str],
    template: str | None,
) -> None:
    # The vocabulary (an array of strings) and numbers come before the template, as in a real
    # GGUF: the reader must step over them exactly.
    kvs = [string_kv(f"k.{n}.{key}", value) for n, (key, value) in enumerate(before)]
    kvs += [u32_kv("general.alignment", 32), token_array_kv("tokenizer.ggml.tokens", tokens)]
    if template is not None:
        kvs.append(string_kv(gguf.CHAT_TEMPLATE, template))
    kvs.append(string_kv("general.name", "after"))
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    path.write_bytes(header(kvs))
    assert gguf.chat_template(path) == template
    assert gguf.string_values(path, {"general.name"}) == {"general.name": "after"}


def test_a_file_that_is_not_a_gguf_is_a_clear_error(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(ProviderError, match="not a GGUF file"):
        gguf.chat_template(text)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(header([string_kv(gguf.CHAT_TEMPLATE, TEMPLATE)])[:30])
    with pytest.raises(ProviderError, match="truncated header"):
        gguf.chat_template(cut)
    with pytest.raises(ProviderError, match="cannot read the model file"):
        gguf.chat_template(tmp_path / "missing.gguf")


def test_a_crash_is_one_line_naming_the_signal() -> None:
    segv = crash_cause(-signal.SIGSEGV, "Fatal Python error: Segmentation fault")
    assert segv == "the embedded model crashed (SIGSEGV, Segmentation fault)"
    ill = crash_cause(-signal.SIGILL, "")
    assert "SIGILL" in ill and "lacks an instruction" in ill
    status = crash_cause(1, "ImportError: libgomp.so.1: cannot open shared object file")
    assert status.endswith("status 1: ImportError: libgomp.so.1: cannot open shared object file")
    assert user_message(LocalModelCrashed(segv)) == ("local_model_crashed", segv, False)


def test_model_local_parallel() -> None:
    assert config_from_dict({}, env={}).model.local.parallel == 2
    config = config_from_dict({"model": {"local": {"parallel": 4}}}, env={})
    assert config.model.local.parallel == 4
    for bad in (0, "many"):
        with pytest.raises(ConfigError, match=r"model\.local\.parallel"):
            config_from_dict({"model": {"local": {"parallel": bad}}}, env={})
    with pytest.raises(ConfigError, match=r"model\.local"):
        config_from_dict({"model": {"local": {"slots": 2}}}, env={})
    assert 1 <= default_threads() <= 4


def test_threads_follow_the_cores_this_process_may_use() -> None:
    """Half the usable cores (its CPU affinity, not the machine's count), 1 to 4: on 2 cores
    a second spinning thread left tokens waiting on the server's core (bench/local_model.py:
    7.5 tokens/s with 1 thread, 0.8 with 2, on a busy 2-core machine)."""
    assert [default_threads(n) for n in (1, 2, 3, 4, 8, 64)] == [1, 1, 1, 2, 4, 4]
    assert default_threads() == default_threads(usable_cores())
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_a_chat_template_gets_the_text_turns() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
        {"role": "tool", "content": "42", "tool_call_id": "c"},
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
        {"role": "assistant", "content": ""},
    ]
    assert template_messages(messages) == messages[:2]
