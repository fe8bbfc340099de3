"""`runbook new`: the files of a new runbook, its tests and its knowledge-base article.

Every text is a `TODO(runbook new)` marker with a hint of what to write, and lint
refuses the files until each marker is gone. Apart from the markers a scaffold is
a complete runbook: it loads, its one test case reaches its one conclusion, and
the article links to the runbook and back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from runbook.format.model import Text
from runbook.format.problems import did_you_mean
from runbook.format.todo import MARKER

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ID_MAX = 64  # the schema's limit on ids


class ScaffoldError(Exception):
    """A reason not to write anything, in both languages."""

    def __init__(self, text: Text) -> None:
        super().__init__(text.en)
        self.text = text


@dataclass(frozen=True)
class Targets:
    """Where the four files of runbook `rid` go."""

    rid: str
    runbook_dir: Path
    kb_dir: Path

    @property
    def runbook(self) -> Path:
        return self.runbook_dir / f"{self.rid}.yaml"

    @property
    def tests(self) -> Path:
        return self.runbook_dir / f"{self.rid}.tests.yaml"

    def article(self, lang: str) -> Path:
        return self.kb_dir / self.rid / f"{lang}.md"

    def files(self) -> list[Path]:
        return [self.runbook, self.tests, self.article("en"), self.article("zh")]


def first_on_path(variable: str, fallback: str) -> Path:
    """The first directory of an os.pathsep-separated variable, else `./fallback`."""
    entries = [p for p in os.environ.get(variable, "").split(os.pathsep) if p]
    return Path(entries[0]) if entries else Path(fallback)


def check_id(rid: str) -> None:
    if not ID_PATTERN.match(rid) or len(rid) > ID_MAX:
        raise ScaffoldError(Text(
            f"{rid!r} is not a valid runbook id (lowercase letters, digits and '-', starting with a "
            f"letter or digit, at most {ID_MAX} characters; e.g. dataloader-open-files)",
            f"{rid!r} 不是合法的 runbook id（只能用小写字母、数字和 '-'，以字母或数字开头，"
            f"最多 {ID_MAX} 个字符；例如 dataloader-open-files）"))


def check_taxonomy(ids: Sequence[str]) -> None:
    from runbook.format import taxonomy

    known = taxonomy.load()
    if not ids:
        raise ScaffoldError(Text("give at least one taxonomy id (e.g. --taxonomy hang.dataloader)",
                                 "至少给出一个分类 id（例如 --taxonomy hang.dataloader）"))
    for tid in ids:
        if tid not in known:
            hint = did_you_mean(tid, known)
            raise ScaffoldError(Text(
                f"unknown taxonomy id {tid!r}{hint} (the ids are in taxonomy.yaml; without "
                "--taxonomy, on a terminal, runbook new lists them)",
                f"未知的分类 id {tid!r}{_zh_hint(hint)}（所有 id 见 taxonomy.yaml；在终端上不带 "
                "--taxonomy 运行 runbook new 会列出它们）"))


def _zh_hint(hint: str) -> str:
    """` (did you mean 'x'?)` -> `（是不是想写 'x'？）`."""
    found = re.search(r"'[^']*'", hint)
    return f"（是不是想写 {found.group(0)}？）" if found else ""


def check_free(targets: Targets, runbook_dirs: Sequence[Path], kb_dirs: Sequence[Path]) -> None:
    """Refuse an id that a runbook or article on the search paths already has, or a file that exists."""
    for path in targets.files():
        if path.exists():
            raise ScaffoldError(Text(f"{path} already exists (pick another id, or remove the file)",
                                     f"{path} 已经存在（换一个 id，或先删除该文件）"))
    holder = _runbook_with_id(targets.rid, runbook_dirs)
    if holder is None:
        holder = next((d / targets.rid for d in kb_dirs if (d / targets.rid).is_dir()), None)
    if holder is not None:
        raise ScaffoldError(Text(
            f"a runbook or article with id {targets.rid!r} already exists: {holder} "
            "(edit that one, or pick another id)",
            f"id 为 {targets.rid!r} 的 runbook 或文章已经存在：{holder}（请修改它，或换一个 id）"))


def _runbook_with_id(rid: str, dirs: Sequence[Path]) -> Path | None:
    from runbook.library.runbooks import load_library, runbook_files

    library = load_library([d for d in dirs if d.is_dir()])
    if rid in library.by_id:
        return Path(library.by_id[rid].path)
    # A file that does not load (a scaffold still holding its markers) has no id to ask for.
    return next((f for f in runbook_files([d for d in dirs if d.is_dir()])
                 if f.name == f"{rid}.yaml"), None)


def write(targets: Targets, taxonomy_ids: Sequence[str]) -> list[Path]:
    """Write the four files (none of which may exist); returns them in order."""
    values = {"rid": targets.rid, "taxonomy": ", ".join(taxonomy_ids), "marker": MARKER}
    contents = {
        targets.runbook: Template(RUNBOOK).substitute(values),
        targets.tests: Template(TESTS).substitute(values),
        targets.article("en"): Template(ARTICLE_EN).substitute(values),
        targets.article("zh"): Template(ARTICLE_ZH).substitute(values),
    }
    for path, text in contents.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as out:  # "x": never overwrite a file
            out.write(text)
    return list(contents)


RUNBOOK = """\
# Scaffolded by `runbook new $rid`. Replace every "$marker" with the real text (lint
# refuses the file while one is left), in English (en) and Chinese (zh); then run
#   runbook test --coverage runbooks/$rid.yaml
# CONTRIBUTING.md walks through a complete example.
apiVersion: runbook/v1
id: $rid
version: 0.1.0        # semver; bump it with every change to behaviour (runbook lint --base checks)
# requires: ">=0.1"   # the oldest runbook engine this file needs, if it uses newer checks or fields
title:                # a few words naming the failure, as people search for it
  en: "$marker: what fails, in a few words"
  zh: "$marker：用几个词说出是什么故障"
summary:              # when to run this runbook, and what it tells apart
  en: "$marker: when to run this runbook and what it finds out"
  zh: "$marker：什么时候运行这个 runbook，它能查出什么"
tags: []              # lowercase words for search, e.g. [dataloader, ulimit]
symptoms:             # what a person sees; feeds search and `runbook triage`
  - en: "$marker: what a person sees, e.g. the error line in the log"
    zh: "$marker：人能看到的现象，例如日志里的报错行"
# signatures:         # regexes of log lines that point `runbook triage` to this runbook
#   - {pattern: 'the exact error text', goto: first-check, conclusion: the-conclusion-it-shows}
# params:             # values given with --set name=value
#   log: {type: path, required: true, help: {en: The training log, zh: 训练日志}}
start: first-check
steps:
  first-check:        # rename it (and `start`) after what it looks at
    title:
      en: "$marker: what this step looks at"
      zh: "$marker：这一步检查什么"
    check:            # read-only; `runbook show checks` lists the types and their fields
      type: command
      with:
        run: "uname -a  # $marker: a read-only command that shows the problem"
        match: "$marker: a regex its output matches when the problem is there"
      timeout: 10s
    branches:         # first match wins; `result` holds the check's fields
      - when: result.ok and result.matched
        goto: problem-found
    # default: another-step   # where a node goes when no branch matches
conclusions:
  problem-found:      # rename it after the cause
    severity: warning # ok | info | warning | critical
    taxonomy: [$taxonomy]
    title:
      en: "$marker: the cause, in a few words"
      zh: "$marker：用几个词说出原因"
    explanation:      # Markdown: why the evidence means this cause
      en: "$marker: why the evidence means this cause"
      zh: "$marker：为什么这些证据说明是这个原因"
    fixes:
      - title:
          en: "$marker: what to do"
          zh: "$marker：应该怎么做"
        body:
          en: "$marker: how to do it, step by step"
          zh: "$marker：具体怎么做，一步一步写"
        effect: read-only   # read-only | changes-state | disruptive; add `run:` for a command
    see_also: [kb:$rid]
changelog:            # one entry per version, in both languages
  - version: 0.1.0
    en: "$marker: what this version does"
    zh: "$marker：这个版本做了什么"
"""

TESTS = """\
# Canned check results replayed through $rid by `runbook test` (no cluster needed).
# One case per way through the tree: `runbook test --coverage` wants every branch and
# every conclusion reached. The fields of a result are the check's (`runbook show checks`).
runbook: $rid
cases:
  - name: the check finds the problem
    results:
      first-check: {exit_code: 0, ok: true, matched: true, stdout: "what the command printed"}
    expect: {conclusion: problem-found, taxonomy: [$taxonomy], path: [first-check]}
"""

ARTICLE_EN = """\
---
id: $rid
lang: en
title: "$marker: the failure, as people search for it"
summary: "$marker: two sentences: what people see, and what this article explains"
tags: []
taxonomy: [$taxonomy]
runbooks: [$rid]
---

$marker: what goes wrong and how it shows, in a paragraph.

## What it looks like

$marker: the exact error lines, in a ```text block.

## Why it happens

$marker: the mechanism, and how to confirm it on a node (or `runbook run $rid`).

## How to fix it

$marker: the fixes, most likely first.
"""

ARTICLE_ZH = """\
---
id: $rid
lang: zh
title: "$marker：故障名称，用大家搜索时会用的说法"
summary: "$marker：两句话：用户看到什么，本文讲什么"
tags: []
taxonomy: [$taxonomy]
runbooks: [$rid]
---

$marker：用一段话说明出了什么问题、表现是什么。

## 现象

$marker：原样贴出报错行，放在 ```text 代码块里。

## 原因

$marker：原理，以及如何在节点上确认（或运行 `runbook run $rid`）。

## 解决方法

$marker：解决方法，最可能的放在前面。
"""
