"""PyAV helpers for dataset videos: encode (via embody.video's writer), probe, remux-concatenate, decode.

Every episode video starts on a keyframe and has keyframes at most ``gop`` frames apart, so
concatenating episodes is a pure remux (packets copied, timestamps shifted: no re-encode, frames
stay bit-identical) and any frame decodes after at most ``gop - 1`` others.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np

from embody.video import VideoWriter

CRF = 23  # libx264 quality (lerobot: crf 30 with AV1); tests bound the codec loss


def encoder_name() -> str:
    """``libx264`` (H.264, what lerobot writes when not AV1) or ``mpeg4`` where x264 is missing."""
    import av

    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


class EpisodeVideoWriter(VideoWriter):
    """embody's MP4 writer with the codec chosen by :func:`encoder_name` and frames kept uncropped.

    Frames are (H, W, 3) uint8 with H and W even (yuv420p halves chroma); timestamps are
    frame_index / fps exactly (the encoder numbers frames in order).
    """

    def _open(self, height: int, width: int) -> None:
        import av

        codec = encoder_name()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(self._tmp), mode="w", format="mp4")
        self._stream = self._container.add_stream(codec, rate=Fraction(self.fps).limit_denominator(1000))
        self._stream.width, self._stream.height = width, height
        self._stream.pix_fmt = "yuv420p"
        self._stream.gop_size = self.gop
        if codec == "libx264":
            self._stream.options = {"crf": str(self.crf), "preset": "veryfast", "g": str(self.gop)}
        else:
            self._stream.options = {"g": str(self.gop)}
            self._stream.bit_rate = 8_000_000

    def abort(self) -> None:
        """Drop the partial file (an episode that will not be saved)."""
        if self._container is not None:
            self._container.close()
            self._container = None
        self._tmp.unlink(missing_ok=True)


def video_info(path: str | Path, gop: int, crf: int | None) -> dict:
    """The feature ``info`` lerobot records for a video (its ``get_video_info`` keys) plus ``video.g``."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        info = {
            "video.height": s.height,
            "video.width": s.width,
            "video.codec": s.codec_context.codec.canonical_name,
            "video.pix_fmt": s.pix_fmt,
            "video.is_depth_map": False,
            "video.fps": int(s.base_rate) if s.base_rate else None,
            "video.channels": 3,
            "video.g": gop,
            "has_audio": len(c.streams.audio) > 0,
        }
    if crf is not None and encoder_name() == "libx264":
        info["video.crf"] = crf
    return info


def extradata(path: str | Path) -> bytes:
    """The stream's codec extradata (SPS/PPS for H.264): files can be remuxed together only if equal."""
    import av

    with av.open(str(path)) as c:
        return bytes(c.streams.video[0].codec_context.extradata or b"")


def packets_in_range(path: str | Path, from_ts: float, to_ts: float, fps: float) -> list[tuple[int, bool]]:
    """[(frame index relative to ``from_ts``, is_keyframe)] of the packets whose time lies in [from, to)."""
    import av

    half = 0.5 / fps
    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        tb = s.time_base
        for p in c.demux(s):
            if p.pts is None or p.size == 0:
                continue
            t = float(p.pts * tb)
            if from_ts - half <= t < to_ts - half:
                out.append((round((t - from_ts) * fps), bool(p.is_keyframe)))
    return sorted(out)


def concat(sources: list[tuple[Path, float, int]], dst: Path, fps: int) -> list[float]:
    """Remux episode clips into one MP4 without re-encoding; returns each clip's new from_timestamp.

    ``sources``: [(file, from_timestamp, num_frames)], all encoded with equal extradata. Packets
    of a clip are those timed in [from, from + n / fps); they are shifted to start where the
    previous clip ended. Written to a temporary name beside ``dst``, then ``os.replace``'d.
    """
    import av

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.partial.mp4")
    starts: list[float] = []
    offset_frames = 0
    half = Fraction(1, 2 * fps)
    with av.open(str(tmp), mode="w", format="mp4") as out:
        ostream = None
        for path, from_ts, n in sources:
            from_frames = round(from_ts * fps)
            lo, hi = Fraction(from_frames, fps) - half, Fraction(from_frames + n, fps) - half
            with av.open(str(path)) as inp:
                s = inp.streams.video[0]
                if ostream is None:
                    ostream = out.add_stream_from_template(s)
                tb = s.time_base
                shift = round(Fraction(offset_frames - from_frames, fps) / tb)
                for p in inp.demux(s):
                    if p.pts is None or p.size == 0:
                        continue
                    if not lo <= p.pts * tb < hi:
                        continue
                    p.pts += shift
                    if p.dts is not None:
                        p.dts += shift
                    p.stream = ostream
                    out.mux(p)
            starts.append(offset_frames / fps)
            offset_frames += n
    os.replace(tmp, dst)
    return starts


class VideoReader:
    """Random access to one MP4's frames, for a process that reads many frames of it.

    Opening builds the file's packet index (timestamps, byte offsets, keyframe flags: a demux,
    no decoding; it reads the whole file once, ~10 µs a packet: a 100,000-packet file pays ~1 s
    on its first frame, once per process). A read then sends the decoder exactly the packets it needs, each read from the
    file at its offset, from the last keyframe before the wanted frame to the frame itself, and
    drains the decoder instead of feeding it the next packet (the H.264 stream declares a
    reorder delay, so without the drain a frame would cost decoding the following keyframe).
    The colour converter is kept too: PyAV's ``to_ndarray(format=...)`` builds a new swscale
    context per frame, which costs more than the conversion. Frames are bit-identical to
    :func:`decode`'s: the same packets reach the same decoder, converted with the same settings.
    """

    def __init__(self, path: str | Path):
        import av
        from av.video.reformatter import VideoReformatter

        self.path = str(path)
        self._container = av.open(self.path)
        stream = self._container.streams.video[0]
        self._codec, self._time_base = stream.codec_context, stream.time_base
        rows, first = [], b""
        for p in self._container.demux(stream):
            if p.pts is not None and p.size > 0:
                first = first or bytes(p)
                rows.append((p.pts, p.dts, p.pos, p.size, p.is_keyframe))
        self._pts, self._dts, self._pos, self._size = ([r[i] for r in rows] for i in range(4))  # decode order
        self._key = [bool(r[4]) for r in rows]
        # float(pts * time_base) exactly: both integers are exact in float64 and division rounds correctly
        num, den = self._time_base.numerator, self._time_base.denominator
        self._seconds = np.asarray(self._pts, dtype=np.int64) * num / den
        self._by_time = np.argsort(self._seconds, kind="stable")  # decode-order position of each time
        # per packet: decode-order position of the last keyframe at or before it (-1: none)
        self._key_before = np.maximum.accumulate(np.where(self._key, np.arange(len(rows)), -1)) if rows else []
        self._file = open(self.path, "rb")
        self._rgb = VideoReformatter()
        # MP4 stores each packet's bytes raw at its offset; any other layout goes through the demuxer
        self.direct = bool(rows) and self._read(0) == first

    def _read(self, j: int) -> bytes:
        return os.pread(self._file.fileno(), self._size[j], self._pos[j])

    def close(self) -> None:
        self._container.close()
        self._file.close()

    def frames(self, from_ts: float, fps: int, frame_indices: np.ndarray) -> np.ndarray:
        """Frames ``frame_indices`` (relative to ``from_ts``) -> (k, H, W, 3) uint8, in the given order.

        Raises LookupError naming the frames the file does not hold.
        """
        wanted = np.asarray(frame_indices, dtype=np.int64)
        if wanted.size == 0:
            raise ValueError("no frame indices given")
        if not self.direct:
            return decode(self.path, from_ts, fps, wanted, container=self._container)
        targets = np.unique(wanted)
        got = self._decode_runs(self._runs(self._positions(from_ts, fps, targets)), from_ts, fps, set(targets.tolist()))
        missing = [int(i) for i in targets if int(i) not in got]
        if missing:  # a stream shaped unlike ours: the demuxer's seek and decode (LookupError if truly absent)
            got.update(zip(missing, decode(self.path, from_ts, fps, np.array(missing), container=self._container)))
        return np.stack([got[int(i)] for i in wanted])

    def _positions(self, from_ts: float, fps: int, targets: np.ndarray) -> list[int]:
        """Decode-order positions of the packets timed at frames ``targets`` (absent ones left out)."""
        if not len(self._pts):
            return []
        k = np.searchsorted(self._seconds[self._by_time], from_ts + (targets - 0.5) / fps)
        k = np.minimum(k, len(self._pts) - 1)
        pos = self._by_time[k]
        found = np.round((self._seconds[pos] - from_ts) * fps) == targets
        return sorted(int(j) for j in pos[found])

    def _runs(self, positions: list[int]) -> list[tuple[int, int]]:
        """[(first, last)] decode-order packet ranges covering ``positions``, each from a keyframe.

        A wanted packet joins the current run when its keyframe is no later than the packet after
        the run's end (continuing decodes nothing extra); otherwise a new run starts at its keyframe.
        """
        runs: list[list[int]] = []
        for j in positions:
            start = self._start(j)
            if runs and start <= runs[-1][1] + 1:
                runs[-1][1] = max(runs[-1][1], j)
            else:
                runs.append([start, j])
        return [(a, b) for a, b in runs]

    def _start(self, j: int) -> int:
        """Where decoding packet ``j`` starts: the last keyframe before it in decode order that is not
        shown after it (an open-GOP keyframe's leading frames need the keyframe before it)."""
        k = int(self._key_before[j])
        while k > 0 and self._pts[k] > self._pts[j]:
            k = int(self._key_before[k - 1])
        return max(k, 0)

    def _decode_runs(self, runs, from_ts: float, fps: int, targets: set[int]) -> dict[int, np.ndarray]:
        import av

        got: dict[int, np.ndarray] = {}
        tb = self._time_base

        def keep(frames) -> None:
            for frame in frames:
                if frame.pts is None:
                    continue
                i = round((float(frame.pts * tb) - from_ts) * fps)
                if i in targets:
                    got[i] = self._rgb.reformat(frame, format="rgb24").to_ndarray()

        for first, last in runs:
            self._codec.flush_buffers()
            for j in range(first, last + 1):
                packet = av.Packet(self._read(j))
                packet.pts, packet.dts, packet.time_base = self._pts[j], self._dts[j], tb
                packet.is_keyframe = bool(self._key[j])
                keep(self._codec.decode(packet))
            keep(self._codec.decode(None))  # drain: the frames still held for reordering
        self._codec.flush_buffers()
        return got


def decode(path: str | Path, from_ts: float, fps: int, frame_indices: np.ndarray, container=None) -> np.ndarray:
    """Decode frames ``frame_indices`` (relative to ``from_ts``) -> (k, H, W, 3) uint8, in the given order.

    Seeks to the keyframe before the first wanted frame and decodes forward until the last one.
    Raises LookupError naming the frames it could not find.
    """
    import av

    wanted = np.asarray(frame_indices, dtype=np.int64)
    if wanted.size == 0:
        raise ValueError("no frame indices given")
    targets = set(int(i) for i in wanted)
    lo, hi = min(targets), max(targets)
    own = container is None
    c = av.open(str(path)) if own else container
    try:
        s = c.streams.video[0]
        tb = s.time_base
        c.seek(max(0, int((from_ts + lo / fps - 0.5 / fps) / tb)), stream=s, backward=True, any_frame=False)
        got: dict[int, np.ndarray] = {}
        for frame in c.decode(s):
            if frame.pts is None:
                continue
            i = round((float(frame.pts * tb) - from_ts) * fps)
            if i in targets:
                got[i] = frame.to_ndarray(format="rgb24")
            if i >= hi:
                break
    finally:
        if own:
            c.close()
    missing = sorted(targets - set(got))
    if missing:
        raise LookupError(f"frames {missing[:5]}{'...' if len(missing) > 5 else ''} not found")
    return np.stack([got[int(i)] for i in wanted])
