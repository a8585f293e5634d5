"""Views of the probe document: terminal (rich) and Markdown, registered with :mod:`flagos_doctor.output` (JSON is the sink's, as for every document). Each renders the document only."""
