"""The one MP4 writer every command uses: PyAV, H.264, short keyframe interval."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


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
