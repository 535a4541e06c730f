"""The web page (DESIGN.md §10) driven in Debian's Chromium through Playwright."""
