"""The built site (``make book``) in headless Chromium: every page, accessibility, the print edition."""
