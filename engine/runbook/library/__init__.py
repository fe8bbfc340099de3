"""Every runbook and article, found and searchable: the search path, the knowledge base,
search and its index, library-wide coverage, shipped content, check docs, the format
reference and `runbook new`'s scaffolds. Built on `format`.
"""
