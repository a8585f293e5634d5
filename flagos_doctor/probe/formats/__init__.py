"""Views of the probe document: terminal (rich), Markdown, JSON. Each renders the document only."""
