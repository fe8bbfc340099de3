"""`runbook new ID`: scaffold a runbook, its tests and its knowledge-base article to fill in."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runbook.format.model import Text

if TYPE_CHECKING:
    from runbook.library.scaffold import Targets

PROMPT = Text("Taxonomy ids of its conclusion, comma-separated: ", "结论的分类 id（多个用逗号分隔）：")


def run(args: argparse.Namespace) -> int:
    from runbook.library import scaffold
    from runbook.library.kb import kb_dirs
    from runbook.library.runbooks import search_path

    lang: str = args.lang
    targets = scaffold.Targets(
        args.id,
        Path(args.dir) if args.dir else scaffold.first_on_path("RUNBOOK_PATH", "runbooks"),
        Path(args.kb_dir) if args.kb_dir else scaffold.first_on_path("RUNBOOK_KB_PATH", "kb"))
    try:
        scaffold.check_id(args.id)
        scaffold.check_free(targets, [*search_path(), targets.runbook_dir],
                            [*kb_dirs(), targets.kb_dir])
        ids = _taxonomy(args.taxonomy, lang)
        scaffold.check_taxonomy(ids)
        written = scaffold.write(targets, ids)
    except scaffold.ScaffoldError as exc:
        print(f"runbook new: {exc.text.get(lang)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"runbook new: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    _print_next(targets, written, lang, on_paths=(search_path(), kb_dirs()))
    return 0


def _taxonomy(given: str | None, lang: str) -> list[str]:
    from runbook.library.scaffold import ScaffoldError

    if given is not None:
        return _split(given)
    if not sys.stdin.isatty():
        raise ScaffoldError(Text(
            "no --taxonomy given and no terminal to ask on: pass --taxonomy with the ids of the "
            "conclusion, e.g. --taxonomy hang.dataloader,perf.input-bound (see taxonomy.yaml)",
            "没有给出 --taxonomy，也没有可以提问的终端：请用 --taxonomy 给出结论的分类 id，"
            "例如 --taxonomy hang.dataloader,perf.input-bound（见 taxonomy.yaml）"))
    return _ask(lang)


def _split(text: str) -> list[str]:
    return [part for part in re.split(r"[,\s]+", text) if part]


def _ask(lang: str) -> list[str]:
    """List the categories, then read ids until they are all known (EOF gives up)."""
    from runbook.library.scaffold import ScaffoldError, check_taxonomy

    print(_categories(lang))
    while True:
        try:
            ids = _split(input(PROMPT.get(lang)))
        except (EOFError, KeyboardInterrupt):
            print()
            raise ScaffoldError(Text("no taxonomy ids given", "没有给出分类 id")) from None
        try:
            check_taxonomy(ids)
            return ids
        except ScaffoldError as exc:
            print(exc.text.get(lang))


def _categories(lang: str) -> str:
    """Every taxonomy id under its group, with its description cut to the terminal's width."""
    from runbook.format import taxonomy
    from runbook.i18n.textwidth import clip, pad

    header = Text("Taxonomy ids (taxonomy.yaml):", "分类 id（taxonomy.yaml）：").get(lang)
    known = taxonomy.load()
    width = max(len(cid) for cid in known) + 2
    columns = shutil.get_terminal_size((100, 24)).columns
    lines, group = [header], ""
    for category in known.values():
        if category.group != group:
            group = category.group
            lines.append(f"  {group}")
        described = category.zh if lang == "zh" else category.en
        lines.append(clip(f"    {pad(category.id, width)}{described}", columns - 1))
    return "\n".join(lines)


def _print_next(targets: Targets, written: list[Path], lang: str,
                on_paths: tuple[list[Path], list[Path]]) -> None:
    from runbook.format.todo import MARKER

    zh = lang == "zh"
    for path in written:
        print(f"{'已写入' if zh else 'wrote'} {path}")
    runbook, article = targets.runbook, targets.kb_dir / targets.rid
    steps = [
        (f"replace every {MARKER} in these files with the real text, in English and Chinese",
         f"把这些文件中的每个 {MARKER} 换成真正的内容，英文和中文都要写"),
        (f"runbook test --coverage {runbook}      # every branch and conclusion reached",
         f"runbook test --coverage {runbook}      # 每个分支和结论都要被测试走到"),
        ("runbook site serve      # preview the pages", "runbook site serve      # 预览页面"),
        (f"runbook i18n stamp {runbook} {article}      # the translations are in step",
         f"runbook i18n stamp {runbook} {article}      # 记录中英文已经对应"),
        ("runbook lint --strict --base origin/main      # then open the pull request",
         "runbook lint --strict --base origin/main      # 然后提交 pull request"),
    ]
    print("\n下一步（CONTRIBUTING.zh.md 里有完整的例子）：" if zh
          else "\nNext (CONTRIBUTING.md has a worked example):")
    for number, (en, zh_text) in enumerate(steps, 1):
        print(f"  {number}. {zh_text if zh else en}")
    _notes_off_path(targets, lang, on_paths)


def _notes_off_path(targets: Targets, lang: str, on_paths: tuple[list[Path], list[Path]]) -> None:
    """A directory written to but not searched: run, lint, test and site build would miss it."""
    zh = lang == "zh"
    for directory, variable, searched in ((targets.runbook_dir, "RUNBOOK_PATH", on_paths[0]),
                                          (targets.kb_dir, "RUNBOOK_KB_PATH", on_paths[1])):
        if directory.resolve() not in [d.resolve() for d in searched]:
            print(f"注意：{directory} 不在搜索路径上；把它加进 {variable}，run、lint、test 和 site build "
                  "才能找到它" if zh else
                  f"note: {directory} is not on the search path; add it to {variable} so that run, "
                  "lint, test and site build find it")
