"""Finding 2 of the second hardening pass, in the web app: after the server's store lost its
data, seqs begin again at 1 and the app dropped every frame whose seq it had seen. A ``ready``
or ``sync`` with another chat log ``epoch`` makes it forget them."""

from __future__ import annotations

from .conftest import Web


def test_a_new_epoch_lets_the_restarted_seqs_show(app: Web) -> None:
    page = app.open("epoch")
    shown = page.evaluate("""() => {
        const store = window.__iris.view;
        const message = (seq, text) => ({type: "message", message_id: "m" + seq + text,
          role: "assistant", text, seq, chat_id: "epoch"});
        store.apply({type: "sync", messages: [], epoch: "before", seq: 0});
        store.apply(message(1, "old"));
        store.apply(message(1, "again, same epoch"));  // a replay: dropped
        store.apply({type: "sync", messages: [], epoch: "after", seq: 0});
        store.apply(message(1, "new"));
        return {texts: store.bubbles.map((b) => b.text), last: store.lastSeq};
    }""")
    assert shown["texts"] == ["new"]
    assert shown["last"] == 1
