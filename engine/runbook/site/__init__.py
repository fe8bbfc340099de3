"""The static site: runbooks and knowledge-base articles rendered to HTML in English and 中文."""
