"""How fast `runbook site build` renders a large runbook library and knowledge base, against MkDocs.

Run from the repository root:
    .venv/bin/python bench/site/run.py [--runbooks 500] [--articles 500] [--repeat 3] [--keep DIR] [--json]
    .venv/bin/python bench/site/run.py --quick    # 100 + 100, one run, no profile: a few minutes

1. Generates N valid bilingual runbooks and M articles (bench/site/generate.py, seeded) into a
   temporary directory and checks them with `runbook lint` (untimed).
2. Times `runbook site build -o OUT` (with and without `--no-search`) with RUNBOOK_PATH and
   RUNBOOK_KB_PATH pointing at them; the repository's own runbooks and kb are built too.
3. Writes the same content (the very runbooks and articles our builder loads) as a MkDocs
   project (bench/site/mkdocs_tree.py: built-in `mkdocs` theme and `search` plugin; untimed),
   checks once that its build touches no network, then times `mkdocs build -q`.
4. Runs the builds interleaved, `--repeat` rounds, and reports the best run of each:
   pages (every *.html written), seconds, ms/page, CPU seconds; the ratio ours / MkDocs and
   the targets: at most 5 ms per page in total, and at most half MkDocs' time. Every build of
   ours uses the bench's own load cache (XDG_CACHE_HOME in the work directory), warmed by lint:
   - `runbook site build` and `--no-search` into an empty folder, with no cached pieces of pages
     (the cache's `site/` folder removed first: runbook/site/fragments.py), as a first build;
   - again over the first one's site, nothing changed: the search bundle is kept
     (runbook/site/search_reuse.py) and the pieces come from the cache;
   - again over it after one runbook's title was edited (a new title each round): that
     runbook's pages and the lists naming it change, Pagefind indexes the whole site again;
   - into an empty folder with the pieces cached (a CI job that restores the cache).
5. Times `runbook site serve`'s rebuild after one runbook is saved (bench/site/serve_rebuild.py).
6. Profiles one build of ours (cProfile) and prints the 15 entries under runbook/site with the
   most cumulative time.

Exit status: 0 when every build worked (a missed target is reported, not failed); 1 when
lint found a problem in the generated content or a build failed.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = Path(sys.executable).parent
TARGET_MS_PER_PAGE = 5.0
TARGET_RATIO = 0.5  # of MkDocs' time
QUICK = {"runbooks": 100, "articles": 100, "repeat": 1, "no_profile": True}
BUILD_TIMEOUT_S = 1800
TOP = 15
# `runbook site build` ends with: "N pages in DIR (T s, X ms/page, search index S s)"
BUILT = re.compile(r"pages in .* \(([\d.]+) s, [\d.]+ ms/page, search index ([\d.]+) s\)")
OWN_TOP = 10  # functions anywhere with the most own time, for context

# Run MkDocs with an audit hook that refuses any network use: proof that nothing is fetched.
NO_NETWORK = """
import sys
def deny(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"):
        raise RuntimeError(f"MkDocs tried to use the network: {event} {args!r}")
sys.addaudithook(deny)
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", "build", "-q", "-f", sys.argv[1]]
cli()
"""


class BenchError(Exception):
    """Lint found problems in the generated content, or a build failed."""


@dataclass
class Method:
    name: str
    argv: list[str]
    out: Path  # the site directory it writes (removed before each run, untimed, unless keep_out)
    env: dict[str, str]
    cwd: Path
    search_file: str | None  # a file the search index must leave in `out`
    pages: int = 0
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)  # ours: where each run's time went
    keep_out: bool = False  # build over the previous run's site (a rebuild), not into an empty folder
    before: Callable[[], None] | None = None  # untimed, before each run: empty a cache, edit a file

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)

    @property
    def ms_per_page(self) -> float:
        return 1000 * self.best / max(self.pages, 1)

    @property
    def best_phases(self) -> dict[str, float] | None:
        return self.phases[self.seconds.index(self.best)] if self.phases else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runbooks", type=int, default=500, help="runbooks to generate (default 500)")
    parser.add_argument("--articles", type=int, default=500, help="articles to generate (default 500)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each build; the best counts (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generator (default 1)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (content, sites, profile)")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--quick", action="store_true",
                        help="100 runbooks + 100 articles, one run, no profile (what `make bench` runs)")
    parser.add_argument("--no-serve", action="store_true", help="skip timing site serve's rebuild")
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if args.runbooks < 0 or args.articles < 0 or args.repeat < 1:
        parser.error("--runbooks and --articles must be >= 0, --repeat >= 1")
    return args


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- content --


def make_content(work: Path, args: argparse.Namespace) -> tuple[Any, dict[str, str]]:
    """Generate and lint the content; return what the generator made and the build environment."""
    from generate import generate

    content = work / "content"
    shutil.rmtree(content, ignore_errors=True)
    begin = time.perf_counter()
    generated = generate(content, args.runbooks, args.articles, args.seed)
    log(f"generated {args.runbooks} runbooks and {args.articles} articles "
        f"in {time.perf_counter() - begin:.1f} s; linting them (untimed)")
    # The bench's own load cache: lint warms it; the site's cached pieces are emptied where a
    # row says so (see methods()).
    env = {**os.environ, "RUNBOOK_PATH": str(generated.runbooks_dir),
           "RUNBOOK_KB_PATH": str(generated.kb_dir), "XDG_CACHE_HOME": str(work / "cache")}
    lint(generated.runbooks_dir, generated.kb_dir, env)
    return generated, env


def lint(runbooks: Path, kb: Path, env: dict[str, str]) -> None:
    argv = [str(BIN / "runbook"), "lint", "--format", "json", str(runbooks), str(kb)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise BenchError(f"runbook lint failed (exit {done.returncode}): {done.stderr.strip()}") from None
    if done.returncode != 0 or report["problems"]:
        first = report["problems"][:5]
        raise BenchError(f"runbook lint: {len(report['problems'])} problem(s) in the generated content, "
                         f"e.g. {json.dumps(first, ensure_ascii=False)}")


def write_mkdocs(work: Path, env: dict[str, str]) -> tuple[Path, dict[str, int]]:
    """The MkDocs project from exactly what our builder loads (same search path, same content)."""
    from mkdocs_tree import write_project

    from runbook.site.build import load_content

    saved = {k: os.environ.get(k) for k in ("RUNBOOK_PATH", "RUNBOOK_KB_PATH")}
    os.environ.update({k: env[k] for k in saved})
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)  # the builder also reads ./runbooks and ./kb of its working directory
        content, _ = load_content()
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    project = work / "mkdocs"
    shutil.rmtree(project, ignore_errors=True)
    config = write_project(project, content.runbooks, content.kb)
    stats = {"runbooks": len(content.runbooks), "articles": len(content.kb.articles),
             "steps": sum(len(r.steps) for r in content.runbooks),
             "conclusions": sum(len(r.conclusions) for r in content.runbooks)}
    return config, stats


def check_mkdocs_offline(config: Path) -> None:
    done = subprocess.run([sys.executable, "-c", NO_NETWORK, str(config)], capture_output=True, text=True,
                          cwd=config.parent, timeout=BUILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise BenchError(f"mkdocs build (network check) failed: {tail(done.stderr)}")


# -- timing --


def methods(work: Path, env: dict[str, str], config: Path, edited: Path) -> list[Method]:
    from runbook.site.fragments import KIND

    runbook = str(BIN / "runbook")
    ours, bare, cached = work / "site-ours", work / "site-ours-no-search", work / "site-ours-cached"
    pieces = Path(env["XDG_CACHE_HOME"]) / "runbook" / KIND

    def forget_pieces() -> None:
        shutil.rmtree(pieces, ignore_errors=True)

    edits = iter(range(1, 1_000_000))

    def edit_one_runbook() -> None:  # a new title each round: always a change since the last build
        text = edited.read_text("utf-8")
        head, title, rest = text.partition("\ntitle:\n  en: ")
        rest = re.sub(r"^\(edit \d+\) ", "", rest)
        edited.write_text(f"{head}{title}(edit {next(edits)}) {rest}", "utf-8")

    build = [runbook, "site", "build", "-o"]
    return [
        Method("runbook site build", [*build, str(ours)], ours, env, ROOT, "pagefind/pagefind.js",
               before=forget_pieces),
        Method("runbook site build --no-search", [runbook, "site", "build", "--no-search", "-o", str(bare)],
               bare, env, ROOT, None, before=forget_pieces),
        Method("mkdocs build -q", [str(BIN / "mkdocs"), "build", "-q", "-f", str(config)],
               config.parent / "site", dict(os.environ), config.parent, "search/search_index.json"),
        # Over the first build's site, nothing changed: the search bundle is kept
        # (runbook/site/search_reuse.py), flowcharts and article bodies come from the cache.
        Method("runbook site build (rebuild, unchanged)", [*build, str(ours)], ours, env, ROOT,
               "pagefind/pagefind.js", keep_out=True),
        Method("runbook site build (rebuild, 1 runbook edited)", [*build, str(ours)], ours, env, ROOT,
               "pagefind/pagefind.js", keep_out=True, before=edit_one_runbook),
        Method("runbook site build (empty folder, pieces cached)", [*build, str(cached)], cached, env, ROOT,
               "pagefind/pagefind.js"),
    ]


def run_once(method: Method) -> None:
    if not method.keep_out:
        shutil.rmtree(method.out, ignore_errors=True)
    if method.before:
        method.before()
    cpu_before = _children_cpu()
    begin = time.perf_counter()
    done = subprocess.run(method.argv, capture_output=True, text=True, env=method.env, cwd=method.cwd,
                          timeout=BUILD_TIMEOUT_S, check=False)
    seconds = time.perf_counter() - begin
    cpu = _children_cpu() - cpu_before
    if done.returncode != 0:
        raise BenchError(f"{method.name} failed (exit {done.returncode}): {tail(done.stderr)}")
    if method.search_file and not (method.out / method.search_file).is_file():
        raise BenchError(f"{method.name} built no search index ({method.search_file} is missing): "
                         f"{tail(done.stderr)}")
    method.pages = sum(1 for _ in method.out.rglob("*.html"))
    method.seconds.append(seconds)
    method.cpu.append(cpu)
    found = BUILT.search(done.stderr)
    if found:  # our builder says how long build_site took, and the search index within it
        build_s, index_s = float(found[1]), float(found[2])
        method.phases.append({"start_and_load_s": round(seconds - build_s, 3),
                              "render_s": round(build_s - index_s, 3), "search_index_s": round(index_s, 3)})


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def serve_rebuild(generated: Any, env: dict[str, str]) -> dict[str, Any]:
    """site serve's rebuild after one saved runbook, in its own process (bench/site/serve_rebuild.py)."""
    argv = [sys.executable, str(HERE / "serve_rebuild.py"), "--runbooks", str(generated.runbooks_dir),
            "--kb", str(generated.kb_dir), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=BUILD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise BenchError(f"serve_rebuild.py failed: {tail(done.stderr)}")
    return json.loads(done.stdout)


# -- profile --


def profile(work: Path, env: dict[str, str]) -> dict[str, Any]:
    """One build of ours under cProfile: the top entries under runbook/site by cumulative time."""
    stats_file = work / "site-build.prof"
    out = work / "site-profile"
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "cProfile", "-o", str(stats_file), "-m", "runbook", "site", "build",
            "-o", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=BUILD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise BenchError(f"profiled build failed: {tail(done.stderr)}")
    stats = pstats.Stats(str(stats_file))
    rows = [{"function": func, "file": _where(file), "line": line, "calls": calls, "tottime": round(own, 3),
             "cumtime": round(cumulative, 3)}
            for (file, line, func), (_cc, calls, own, cumulative, _callers) in stats.stats.items()]  # type: ignore[attr-defined]
    site = sorted((r for r in rows if "runbook/site/" in r["file"]), key=lambda r: -r["cumtime"])
    own_time = sorted(rows, key=lambda r: -r["tottime"])
    return {"total_s": round(stats.total_tt, 3), "top": site[:TOP],  # type: ignore[attr-defined]
            "top_own_time": own_time[:OWN_TOP], "stats_file": str(stats_file)}


def _where(file: str) -> str:
    """A profiled function's file, short: from the repository root, or from site-packages on."""
    path = Path(file)
    if "site-packages" in path.parts:
        return "/".join(path.parts[path.parts.index("site-packages") + 1:])
    if path.is_absolute() and path.is_relative_to(ROOT):
        return path.relative_to(ROOT).as_posix()
    return path.name if path.is_absolute() else file


# -- report --


def summary(args: argparse.Namespace, stats: dict[str, int], words: int, runs: list[Method],
            prof: dict[str, Any] | None, serve: dict[str, Any] | None = None) -> dict[str, Any]:
    ours, bare, mkdocs, rebuilt, edited, cached = runs
    ratio = ours.best / mkdocs.best
    return {
        "generated": {"runbooks": args.runbooks, "articles": args.articles, "seed": args.seed,
                      "article_words_en": words},
        "content": stats, "repeat": args.repeat, "cores": cores(),
        "builds": [{"name": m.name, "pages": m.pages, "best_s": round(m.best, 3),
                    "ms_per_page": round(m.ms_per_page, 2), "best_cpu_s": round(m.best_cpu, 3),
                    "runs_s": [round(s, 3) for s in m.seconds], "phases": m.best_phases} for m in runs],
        "ratio": {"ours_vs_mkdocs": round(ratio, 3),
                  "ours_no_search_vs_mkdocs": round(bare.best / mkdocs.best, 3),
                  "ours_unchanged_rebuild_vs_mkdocs": round(rebuilt.best / mkdocs.best, 3),
                  "ours_rebuild_after_edit_vs_mkdocs": round(edited.best / mkdocs.best, 3),
                  "ours_pieces_cached_vs_mkdocs": round(cached.best / mkdocs.best, 3)},
        "targets": {"ms_per_page_at_most_5": ours.ms_per_page <= TARGET_MS_PER_PAGE,
                    "at_most_half_of_mkdocs": ratio <= TARGET_RATIO},
        "serve_rebuild": serve,
        "profile": prof,
    }


def print_report(result: dict[str, Any]) -> None:
    gen, content = result["generated"], result["content"]
    print(f"content: {gen['runbooks']} generated runbooks + {gen['articles']} articles "
          f"({gen['article_words_en']:,} English words in the articles; seed {gen['seed']}) and the "
          f"repository's own; {content['runbooks']} runbooks ({content['steps']:,} steps, "
          f"{content['conclusions']:,} conclusions) and {content['articles']} articles in all, "
          "each in English and Chinese")
    print(f"best of {result['repeat']} interleaved runs; {result['cores']} cores\n")
    width = max(len(b["name"]) for b in result["builds"]) + 2
    print(f"{'build'.ljust(width)}{'pages':>7}{'best s':>9}{'ms/page':>9}{'CPU s':>8}   runs (s)")
    for b in result["builds"]:
        runs = " ".join(f"{s:.2f}" for s in b["runs_s"])
        print(f"{b['name'].ljust(width)}{b['pages']:>7}{b['best_s']:>9.2f}{b['ms_per_page']:>9.2f}"
              f"{b['best_cpu_s']:>8.2f}   {runs}")
    for b in result["builds"]:
        if b["phases"]:
            p = b["phases"]
            print(f"  {b['name']} (best run): start-up and loading {p['start_and_load_s']:.2f} s, "
                  f"rendering {p['render_s']:.2f} s, search index {p['search_index_s']:.2f} s")
    ratio, ours = result["ratio"], result["builds"][0]
    print(f"\nours / MkDocs                      {ratio['ours_vs_mkdocs']:.2f}")
    print(f"ours --no-search / MkDocs          {ratio['ours_no_search_vs_mkdocs']:.2f}")
    print(f"ours rebuild, unchanged / MkDocs   {ratio['ours_unchanged_rebuild_vs_mkdocs']:.2f}")
    print(f"ours rebuild, 1 edit / MkDocs      {ratio['ours_rebuild_after_edit_vs_mkdocs']:.2f}")
    print(f"ours, pieces cached / MkDocs       {ratio['ours_pieces_cached_vs_mkdocs']:.2f}")
    targets = result["targets"]
    print(f"target: ours at most {TARGET_MS_PER_PAGE:g} ms/page     {ours['ms_per_page']:.2f} ms/page: "
          f"{'met' if targets['ms_per_page_at_most_5'] else 'MISSED'}")
    print(f"target: ours at most {TARGET_RATIO:g} x MkDocs   {ratio['ours_vs_mkdocs']:.2f}: "
          f"{'met' if targets['at_most_half_of_mkdocs'] else 'MISSED'}")
    if result["serve_rebuild"]:
        from serve_rebuild import report

        print(report(result["serve_rebuild"]))
    if result["profile"]:
        print_profile(result["profile"])


def print_profile(prof: dict[str, Any]) -> None:
    print(f"\nprofile of one `runbook site build` (cProfile, {prof['total_s']:.2f} s in Python; "
          f"{prof['stats_file']}), top {TOP} under engine/runbook/site by cumulative time:")
    print(f"{'cumtime':>8}{'tottime':>9}{'calls':>9}  function")
    for row in prof["top"]:
        print(_profile_row(row))
    print(f"\nfor context, the {OWN_TOP} functions anywhere with the most own time (tottime):")
    for row in prof["top_own_time"]:
        print(_profile_row(row))


def _profile_row(row: dict[str, Any]) -> str:
    return (f"{row['cumtime']:>8.2f}{row['tottime']:>9.2f}{row['calls']:>9}  "
            f"{row['file']}:{row['line']}({row['function']})")


# -- main --


def bench(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    generated, env = make_content(work, args)
    config, stats = write_mkdocs(work, env)
    log(f"MkDocs project written to {config.parent}; checking its build fetches nothing (untimed)")
    check_mkdocs_offline(config)
    prof = None
    if not args.no_profile:
        log("profiling one build of ours (untimed)")
        prof = profile(work, env)
    runbook_files = sorted(generated.runbooks_dir.glob("*.yaml"))
    runs = methods(work, env, config, edited=runbook_files[len(runbook_files) // 2])
    for round_ in range(1, args.repeat + 1):
        for method in runs:
            run_once(method)
            log(f"round {round_}/{args.repeat}: {method.name}: {method.seconds[-1]:.2f} s, "
                f"{method.pages} pages")
    serve = None
    if not args.no_serve:
        log("timing site serve's rebuild after one saved runbook")
        serve = serve_rebuild(generated, env)
    return summary(args, stats, generated.words_en, runs, prof, serve)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="bench-site-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = bench(work, args)
    except (BenchError, subprocess.TimeoutExpired) as exc:
        print(f"bench/site: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if not args.keep and result.get("profile"):
        result["profile"]["stats_file"] = "(removed with the work directory; use --keep DIR)"
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print_report(result)
        if args.keep:
            print(f"\nkept: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
