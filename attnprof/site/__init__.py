"""The site side: the pieces as a Markdown extension, their tables and figures, the MkDocs hook, notebooks. No torch."""
