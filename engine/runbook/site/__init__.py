"""The static site: runbooks, knowledge-base articles and the format reference rendered to HTML
in English and 中文, with flowcharts and Pagefind search; `site serve` previews it.
"""
