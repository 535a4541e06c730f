"""Speech synthesis engines (DESIGN.md §9): espeak-ng, piper with a voice shipped in a
PyPI package, and any OpenAI-compatible `/v1/audio/speech` server."""
