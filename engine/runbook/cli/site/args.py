"""The arguments of `runbook site` (argparse only: `runbook site --help` imports no more)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="render runbooks/ and kb/ into a static site",
                               description="Render the runbooks and the knowledge base into a static "
                                           "site (English and 中文), with an offline search index.")
    _common(build)
    build.add_argument("--no-search", action="store_true", help="skip the Pagefind search index")
    serve = actions.add_parser("serve", help="build the site, then preview it on http://127.0.0.1:PORT/",
                               description="Build the site into DIR, then serve it for a preview: a "
                                           "saved runbook or article rebuilds only the pages it "
                                           "changes, and the open page reloads itself.")
    _common(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--no-build", action="store_true", help="serve DIR as it is (no rebuild on save)")
    serve.add_argument("--no-watch", action="store_true",
                       help="do not watch the runbooks and kb for saved files (no rebuild, no page reload)")
    serve.add_argument("--no-search", action="store_true", help="skip the Pagefind search index")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="_site", metavar="DIR",
                        help="where the site goes (default ./_site)")
    parser.add_argument("--repo-url", default=None, metavar="URL",
                        help="base of the 'edit this page' links, e.g. https://github.com/ORG/REPO/edit/main "
                             "(default: $RUNBOOK_REPO_URL; unset: no edit links)")
    parser.add_argument("--theme", default=None, metavar="DIR", help="theme directory (default: ./site)")
    parser.add_argument("--strict", action="store_true",
                        help="fail (exit 2) on any content error instead of building the rest")
