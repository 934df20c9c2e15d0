"""The web UI: server-rendered pages (Jinja2, no build step) with logins, over the same tables and commands as the API."""
