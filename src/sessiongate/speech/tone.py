"""Sounds made in code, not spoken: seed 004's warning, played when a request is refused
as unsafe (the seed played a WAV file; this one is computed, so nothing is downloaded or
shipped). Pure: the same bytes every time."""

from __future__ import annotations

import numpy as np

from sessiongate.speech.wav import PcmAudio

#: 16 kHz mono, 16-bit: small, and every player plays it.
SAMPLE_RATE = 16_000


def tone(frequency: float, milliseconds: int, *, volume: float = 0.5) -> np.ndarray:
    """A sine tone with 10 ms fades at both ends (no clicks), as float samples."""
    count = SAMPLE_RATE * milliseconds // 1000
    times = np.arange(count) / SAMPLE_RATE
    samples = volume * np.sin(2 * np.pi * frequency * times)
    fade = min(SAMPLE_RATE // 100, count // 2)
    if fade:
        ramp = np.linspace(0.0, 1.0, fade)
        samples[:fade] *= ramp
        samples[-fade:] *= ramp[::-1]
    return samples


def warning_sound() -> PcmAudio:
    """Two short falling beeps (880 Hz then 660 Hz, 180 ms each, 80 ms apart): about half
    a second, unmistakably not speech."""
    gap = np.zeros(SAMPLE_RATE * 80 // 1000)
    samples = np.concatenate([tone(880.0, 180), gap, tone(660.0, 180)])
    pcm = np.round(samples * 32767).astype("<i2").tobytes()
    return PcmAudio(sample_rate=SAMPLE_RATE, channels=1, sample_width=2, frames=pcm)
