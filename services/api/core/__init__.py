"""The API's pure rules: the web UI's view models (graph layout, grid and list views, next runs) and
the login limit. Standard library and schemas only, like every core."""
