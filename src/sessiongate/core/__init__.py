"""The pure core: lifecycle rules, context assembly and event types. No I/O here."""
