"""The one MP4 writer every command uses (PyAV, H.264, short keyframe interval), and the overlay evaluation videos
can carry."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

VIDEO_SIZE = (640, 480)  # evaluation videos (width, height); camera observations keep the simulator's render size


class VideoWriter:
    """Write RGB frames (H, W, 3) uint8 to ``path``; written to a temp name, renamed on close.

    ``gop`` is the keyframe interval: small values keep random access fast for dataset readers.
    """

    def __init__(self, path: str | Path, fps: float, gop: int = 2, crf: int = 23):
        self.path = Path(path)
        self.fps, self.gop, self.crf = fps, gop, crf
        self._tmp = self.path.with_name(f".{self.path.name}.partial.mp4")
        self._container = self._stream = None

    def _open(self, height: int, width: int) -> None:
        from fractions import Fraction

        import av

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(self._tmp), mode="w")
        rate = Fraction(self.fps).limit_denominator(1000)
        self._stream = self._container.add_stream("libx264", rate=rate)
        self._stream.width, self._stream.height = width - width % 2, height - height % 2
        self._stream.pix_fmt = "yuv420p"
        self._stream.gop_size = self.gop
        self._stream.options = {"crf": str(self.crf), "preset": "veryfast"}

    def write(self, frame: np.ndarray) -> None:
        """Encode one (H, W, 3) uint8 RGB frame; the first frame fixes the size (odd dimensions are cropped
        by one pixel). ValueError for any other shape or dtype."""
        import av

        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"expected an (H, W, 3) uint8 frame, got {frame.shape} {frame.dtype}")
        if self._container is None:
            self._open(*frame.shape[:2])
        frame = frame[: self._stream.height, : self._stream.width]
        for packet in self._stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
            self._container.mux(packet)

    def close(self) -> None:
        """Finish encoding and rename the file into place; nothing is written when no frame came."""
        if self._container is None:
            return
        for packet in self._stream.encode():
            self._container.mux(packet)
        self._container.close()
        self._container = None
        os.replace(self._tmp, self.path)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        elif self._container is not None:  # leave no partial file behind
            self._container.close()
            self._tmp.unlink(missing_ok=True)


def read_frames(path: str | Path) -> np.ndarray:
    """Decode an MP4 into (T, H, W, 3) uint8 (for tests and inspection)."""
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def overlay_lines(info: dict, most_terms: int = 8) -> list[str]:
    """Text for one frame from ``evaluate``'s ``frame_info``: the command, the step's reward and its largest terms."""
    lines = []
    if info.get("command") is not None:
        lines.append("command " + "  ".join(f"{v:+.2f}" for v in info["command"]))
    if info.get("reward") is not None:
        lines.append(f"reward {info['reward']:+.4f}")
    terms = sorted(info.get("terms", {}).items(), key=lambda kv: -abs(kv[1]))[:most_terms]
    lines += [f"  {name} {value:+.4f}" for name, value in terms]
    return lines


def draw_overlay(frame: np.ndarray, lines: list[str]) -> np.ndarray:
    """``frame`` (H, W, 3) uint8 with ``lines`` written in its top-left corner over a dark box."""
    from PIL import Image, ImageDraw

    if not lines:
        return frame
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image, "RGBA")
    height = 12 * len(lines) + 8
    width = 8 + 6 * max(len(line) for line in lines)
    draw.rectangle([0, 0, width, height], fill=(0, 0, 0, 140))
    for i, line in enumerate(lines):
        draw.text((4, 4 + 12 * i), line, fill=(235, 235, 235, 255))
    return np.asarray(image)
