"""Transports: HTTP (REST + SSE, OpenAI-compatible), WebSocket, seed-client routes."""
