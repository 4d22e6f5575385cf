"""Finding 3 of the third hardening pass: with ``model.vision`` an image was decoded whole
before it was downscaled: a 343 KB PNG of 9 400 x 9 400 pixels decoded to 353 MB, and four
chats sending it at once peaked at 3.3 GB. Its size is now read from the header and an image
over the pixel budget is refused before a pixel is decoded (the user is told why); a large
JPEG photo is decoded reduced and still reaches the model. ``bench/image_bomb.py`` prints the
peak memory."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image

from iris.agent.attachments import File, prepare
from tests.agent.images import vision
from tests.chat.attachments import images_in
from tests.conftest import MakeConfig


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and header (RGBA, 8 bits) with no pixel data: what ``Image.open``
    reads to know the size. Decoding it fails; measuring it does not."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


async def test_an_image_over_the_pixel_budget_is_refused_from_its_header(
    make_config: MakeConfig,
) -> None:
    config = vision(make_config)
    bomb = File("image", "bomb.png", "image/png", png_header(9400, 9400))
    prepared = await prepare(config, "look", [bomb])
    assert images_in(prepared.content) == []
    (note,) = prepared.notes
    assert note.startswith("bomb.png: the image is too large to read (9400 x 9400 pixels")


async def test_a_large_jpeg_photo_is_decoded_reduced_and_reaches_the_model(
    make_config: MakeConfig,
) -> None:
    config = vision(make_config, max_edge=512)
    out = io.BytesIO()
    Image.new("RGB", (4000, 3000), (200, 40, 40)).save(out, "JPEG", quality=80)
    photo = File("image", "photo.jpg", "image/jpeg", out.getvalue())
    prepared = await prepare(config, "look", [photo])
    (image,) = images_in(prepared.content)
    assert image.size == (512, 384)
    assert prepared.notes == []
