"""A git patch read file by file: which files it touches, which are binary, and what is never the change.

Collection reads every candidate's patch here, however it was made: read
from a worker's checkout on the lab's host, or sent back by a dask worker.
`without` leaves out the files `[target] ignore` (and the report, the
baseline copy, an agent CLI's scratch files) names, matched as the git
adapter's pathspecs match them (`vcs/git.py` `_excluded`: tracked or not),
so a patch that reaches the lab with a build's outputs in it loses them
here, whichever host produced it. The files a patch touches are those git
reads in it (`git apply --numstat`), never a list its sender wrote.
"""

from __future__ import annotations

import codecs
import re
import subprocess
from collections.abc import Sequence
from functools import lru_cache

_SECTION = re.compile(r"^(?=diff --git )", re.MULTILINE)


def sections(patch: str) -> list[str]:
    """The patch cut before each `diff --git` line (a preamble, if any, is the first piece)."""
    return [piece for piece in _SECTION.split(patch) if piece]


def _unquoted(text: str) -> str | None:
    """A path git wrote C-quoted (`"a/p\\303\\244th"`), as text; None when it is not one."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return None
    raw = text[1:-1].encode("utf-8", "surrogateescape")
    decoded: bytes = codecs.escape_decode(raw)[0]
    return decoded.decode("utf-8", "surrogateescape")


def section_paths(section: str) -> tuple[str, ...]:
    """The paths one section names in its `diff --git` line and its rename or copy lines (() unknown)."""
    header, _, rest = section.partition("\n")
    names = header.removeprefix("diff --git ")
    paths: list[str] = []
    if names.startswith('"'):
        quoted = re.fullmatch(r'("(?:[^"\\]|\\.)*") ("(?:[^"\\]|\\.)*")', names)
        found = [_unquoted(part) for part in quoted.groups()] if quoted else []
        paths = [path[2:] for path in found if path is not None and path[:2] in ("a/", "b/")]
    else:
        half = (len(names) - 1) // 2  # "a/P b/P": a path with spaces splits only at its middle
        if names[:2] == "a/" and names[half:half + 3] == " b/" and names[2:half] == names[half + 3:]:
            paths = [names[2:half]]
    for line in rest.split("\n"):
        if line.startswith(("@@", "GIT binary patch")):
            break
        for prefix in ("rename from ", "rename to ", "copy from ", "copy to "):
            if line.startswith(prefix):
                name = line[len(prefix):]
                paths.append(_unquoted(name) or name)
    return tuple(dict.fromkeys(paths))


@lru_cache(maxsize=256)
def _glob_regex(glob: str) -> re.Pattern[str]:
    """A pathspec glob (`:(glob)`, wildmatch with slashes) as a regex: `*` `?` `[...]` stop at `/`, `**/` and
    `/**` cross directories."""
    out, index = [], 0
    while index < len(glob):
        if glob.startswith("**/", index) and (index == 0 or glob[index - 1] == "/"):
            out.append("(?:.*/)?")
            index += 3
        elif glob.startswith("/**", index) and index + 3 == len(glob):
            out.append("/.*")
            index += 3
        elif glob[index] == "*":
            out.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            out.append("[^/]")
            index += 1
        elif glob[index] == "[" and (end := glob.find("]", index + 2)) != -1:
            body = glob[index + 1:end]
            negated = body[:1] in ("!", "^")
            inner = (body[1:] if negated else body).replace("\\", "\\\\").replace("[", "\\[")
            out.append("(?!/)[" + ("^" if negated else "") + inner + "]")
            index = end + 1
        elif glob[index] == "\\" and index + 1 < len(glob):
            out.append(re.escape(glob[index + 1]))
            index += 2
        else:
            out.append(re.escape(glob[index]))
            index += 1
    return re.compile("".join(out), re.DOTALL)


def ignored(path: str, patterns: Sequence[str]) -> bool:
    """Whether a gitignore-style glob of `patterns` leaves `path` out, as the git adapter's pathspecs do."""
    for pattern in patterns:
        body = pattern.strip("/")
        if not body:
            continue
        where = body if "/" in body or pattern.startswith("/") else f"**/{body}"
        globs = [f"{where}/**"] if pattern.endswith("/") else [where, f"{where}/**"]
        if any(_glob_regex(glob).fullmatch(path) for glob in globs):
            return True
    return False


def without(patch: str, patterns: Sequence[str]) -> str:
    """The patch less every section whose files `patterns` all leave out (a section it cannot read stays)."""
    kept = []
    for section in sections(patch):
        paths = section_paths(section) if section.startswith("diff --git ") else ()
        if not paths or not all(ignored(path, patterns) for path in paths):
            kept.append(section)
    return "".join(kept)


def binary_files(patch: str) -> list[str]:
    """Files a git patch adds or changes as binary content (a deleted binary file is fine)."""
    found = []
    for section in patch.split("diff --git ")[1:]:
        header, _, body = section.partition("\n")
        if ("\nGIT binary patch\n" in "\n" + body or "\nBinary files " in "\n" + body) \
                and "\ndeleted file mode" not in "\n" + body:
            found.append(header.split(" b/", 1)[-1])
    return found


def patch_files(patch: str) -> list[str]:
    """The files a patch touches, as git reads the patch (not as its sender listed them).

    A patch git cannot read still names its files in its `diff --git` lines (the judge's clean apply then
    fails and says why): never no files for a patch that has some.
    """
    if not patch.strip():
        return []
    out = subprocess.run(["git", "apply", "--numstat", "-z", "-"], input=patch.encode("utf-8", "surrogateescape"),
                         capture_output=True, check=False)
    if out.returncode != 0:
        return sorted({path for section in sections(patch) for path in section_paths(section)})
    files: list[str] = []
    fields = out.stdout.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index].decode("utf-8", "surrogateescape")
        if not entry:
            index += 1
            continue
        path = entry.split("\t", 2)[2] if entry.count("\t") >= 2 else ""
        if path:
            files.append(path)
            index += 1
        else:  # a rename: the old and the new path follow as their own fields
            files += [fields[index + 1].decode("utf-8", "surrogateescape"),
                      fields[index + 2].decode("utf-8", "surrogateescape")]
            index += 3
    return sorted(set(files))


def diff_stat(patch: str) -> str:
    """git's diff stat of a patch (`git apply --stat`): a line per file, then the totals ("" for no patch)."""
    if not patch.strip():
        return ""
    out = subprocess.run(["git", "apply", "--stat", "-"], input=patch.encode("utf-8", "surrogateescape"),
                         capture_output=True, check=False)
    return out.stdout.decode("utf-8", "replace").rstrip() if out.returncode == 0 else ""
