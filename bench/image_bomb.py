"""Peak memory of reading images sent to a vision model: the 9 400 x 9 400 PNG bomb.

A 343 KB PNG of 9 400 x 9 400 pixels decodes to 353 MB; before the third hardening pass four
chats of one device sending it at once peaked at 3.3 GB. Each run here is a fresh process that
reads the file, notes its resident memory (idle), then hands it to ``image_url`` from four
threads at once, as four chats would, and prints the peak resident memory above idle
(sampled every 2 ms), what each call answered, and the same for a 6 000 x 4 000 JPEG photo (which
must still reach the model, downscaled) and a 2 896 x 2 896 PNG (the most pixels taken, the
worst an accepted image costs). Target: < 200 MB above idle for the bomb.

    python bench/image_bomb.py
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MAX_EDGE = 1568


def make(folder: Path) -> tuple[Path, ...]:
    from PIL import Image

    bomb, largest, photo = folder / "bomb.png", folder / "largest.png", folder / "photo.jpg"
    Image.new("RGBA", (9400, 9400)).save(bomb, "PNG", optimize=True)
    Image.new("RGBA", (2896, 2896)).save(largest, "PNG", optimize=True)  # at the budget
    Image.new("RGB", (6000, 4000), (200, 40, 40)).save(photo, "JPEG", quality=90)
    return bomb, largest, photo


def measure(path: Path) -> None:
    """In a fresh process: peak RSS above idle of four concurrent reads of ``path``."""
    from PIL import Image

    from iris.agent.attachments import image_url

    Image.init()  # Pillow's format plugins loaded before idle is taken
    data = path.read_bytes()
    idle = rss()
    peak = idle
    answers: list[str] = []
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.002):
            peak = max(peak, rss())

    sampler = threading.Thread(target=sample)
    sampler.start()

    def read() -> None:
        try:
            url = image_url(data, MAX_EDGE)
            answers.append(f"image, {len(url) // 1024} KB data URL")
        except ValueError as exc:
            answers.append(f"refused: {exc}")

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    sampler.join()
    size = f"{len(data) // 1024} KB"
    above = (peak - idle) / 2**20
    print(f"{path.name} ({size}), 4 at once: peak {above:.0f} MB above idle; {answers[0]}")


def rss() -> int:
    """This process's resident memory now, in bytes (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        measure(Path(sys.argv[2]))
        return
    with tempfile.TemporaryDirectory() as folder:
        for path in make(Path(folder)):
            subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True)


if __name__ == "__main__":
    main()
