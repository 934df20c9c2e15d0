"""The web UI: server-rendered pages (Jinja2, no build step) with logins, over the API's tables and commands."""
