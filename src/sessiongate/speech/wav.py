"""WAV files as the engines answer them, and as the gateway writes them.

Read leniently: espeak-ng writing to a pipe cannot seek back to fill in its sizes, so its
header says 0x7FFFF000 bytes of data; a streaming server may say 0xFFFFFFFF. The data
chunk is taken as declared or to the end of the file, whichever is shorter, cut to whole
frames. Written strictly: one `fmt ` and one `data` chunk with the real sizes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sessiongate.speech.base import SpeechError

_PCM = 1
_EXTENSIBLE = 0xFFFE
#: The PCM sub-format GUID of WAVE_FORMAT_EXTENSIBLE, after its first two bytes.
_PCM_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


@dataclass(frozen=True, slots=True)
class PcmAudio:
    """Interleaved little-endian PCM and what it takes to play it."""

    sample_rate: int
    channels: int
    #: Bytes per sample (2: signed 16-bit).
    sample_width: int
    frames: bytes

    @property
    def frame_count(self) -> int:
        return len(self.frames) // (self.channels * self.sample_width)

    @property
    def duration_ms(self) -> int:
        return round(self.frame_count * 1000 / self.sample_rate)

    def same_format(self, other: PcmAudio) -> bool:
        return (self.sample_rate, self.channels, self.sample_width) == (
            other.sample_rate,
            other.channels,
            other.sample_width,
        )

    def to_wav(self) -> bytes:
        block = self.channels * self.sample_width
        header = b"RIFF" + struct.pack("<I", 36 + len(self.frames)) + b"WAVE"
        fmt = struct.pack(
            "<HHIIHH",
            _PCM,
            self.channels,
            self.sample_rate,
            self.sample_rate * block,
            block,
            self.sample_width * 8,
        )
        return (
            header
            + b"fmt "
            + struct.pack("<I", len(fmt))
            + fmt
            + b"data"
            + struct.pack("<I", len(self.frames))
            + self.frames
        )


def parse_wav(data: bytes) -> PcmAudio:
    """The PCM inside a RIFF/WAVE file, or SpeechError `bad_audio`."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise SpeechError("bad_audio", "the engine's answer is not a WAV file")
    offset = 12
    fmt: tuple[int, int, int, int] | None = None
    while offset + 8 <= len(data):
        chunk_id = data[offset : offset + 4]
        (size,) = struct.unpack_from("<I", data, offset + 4)
        body = offset + 8
        if chunk_id == b"fmt ":
            fmt = _read_fmt(data[body : body + size])
        elif chunk_id == b"data":
            if fmt is None:
                raise SpeechError("bad_audio", "the WAV file has no format before its data")
            tag, channels, rate, bits = fmt
            if tag != _PCM or bits not in (8, 16, 24, 32):
                raise SpeechError("bad_audio", "the WAV file is not integer PCM")
            width = bits // 8
            frames = data[body : body + size]  # a streaming header's size runs past the end
            whole = len(frames) - len(frames) % (channels * width)
            return PcmAudio(rate, channels, width, bytes(frames[:whole]))
        offset = body + size + (size & 1)  # chunks are padded to even sizes
    raise SpeechError("bad_audio", "the WAV file has no data chunk")


def _read_fmt(body: bytes) -> tuple[int, int, int, int]:
    if len(body) < 16:
        raise SpeechError("bad_audio", "the WAV format chunk is too short")
    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
    if tag == _EXTENSIBLE and len(body) >= 40 and body[26:40] == _PCM_GUID_TAIL:
        tag = struct.unpack_from("<H", body, 24)[0]
    if not 1 <= channels <= 8 or not 1000 <= rate <= 384_000:
        raise SpeechError("bad_audio", "the WAV format chunk is implausible")
    return tag, channels, rate, bits


def silence(like: PcmAudio, milliseconds: int) -> bytes:
    frames = like.sample_rate * milliseconds // 1000
    # 8-bit PCM is unsigned: its silence is 0x80, not zero.
    fill = b"\x80" if like.sample_width == 1 else b"\x00"
    return fill * (frames * like.channels * like.sample_width)


def concat(parts: Sequence[PcmAudio], gap_ms: int = 0) -> PcmAudio:
    """One stream from sentences synthesised apart, `gap_ms` of silence between them."""
    if not parts:
        raise SpeechError("bad_audio", "no audio to join")
    first = parts[0]
    pieces = [first.frames]
    for part in parts[1:]:
        if not part.same_format(first):
            raise SpeechError("bad_audio", "the engine answered sentences in different formats")
        if gap_ms:
            pieces.append(silence(first, gap_ms))
        pieces.append(part.frames)
    return PcmAudio(first.sample_rate, first.channels, first.sample_width, b"".join(pieces))


def to_pcm16_mono(audio: PcmAudio, rate: int) -> bytes:
    """Signed 16-bit little-endian mono at `rate` (OpenAI's `pcm` is 24 kHz): channels
    averaged, resampled by linear interpolation, which is enough for speech."""
    if audio.sample_width != 2:
        raise SpeechError("bad_audio", "only 16-bit audio can be sent as pcm")
    samples = np.frombuffer(audio.frames, dtype="<i2").astype(np.float32)
    if audio.channels > 1:
        samples = samples.reshape(-1, audio.channels).mean(axis=1)
    if audio.sample_rate != rate and len(samples):
        count = round(len(samples) * rate / audio.sample_rate)
        positions = np.arange(count, dtype=np.float64) * (audio.sample_rate / rate)
        samples = np.interp(positions, np.arange(len(samples)), samples).astype(np.float32)
    return bytes(np.clip(np.rint(samples), -32768, 32767).astype("<i2").tobytes())
