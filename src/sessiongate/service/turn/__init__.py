"""The turn pipeline and its stages: admit, rotate, commit the user message, assemble the
context, produce the reply (plain, client tools, scripted, agent runtime), record it,
and what runs after. Imports `core`, the store ports and other services; never a
transport."""
