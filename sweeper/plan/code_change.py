"""`sweeper.extend=true` onto changed code: the runs already in the sweep dir recorded the code they ran (their
summaries' code_commit, code_dirty, code_diff, script_sha256 and code_files, every project source file they ran:
sweeper.run.observed.provenance); this command would run the new seeds on the code as it is now. A difference is one
warning line naming the files, printed before anything starts. Torch-free.

    line = code_change(plan)      # None, or "sweeper.extend=true onto changed code: ..."
"""
from __future__ import annotations

from sweeper.plan.make import Plan
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.observed.envinfo import git_state
from sweeper.run.observed.provenance import changed_files, diff_sha256, file_sha256, script_of


def recorded_code(plan: Plan, files: dict[str, str | None] | None = None) -> set[tuple]:
    """(commit, dirty, diff hash, script hash) of every run of the plan that recorded its code; `files` (when
    given) gathers the project files they recorded ({path: hash})."""
    found = set()
    for run in plan.runs:
        try:
            summary = run.rundir.read_summary()
        except UnreadableFile:
            continue
        fp = summary.fingerprint if summary is not None else {}
        if any(fp.get(k) is not None for k in ("code_commit", "code_dirty", "script_sha256")):
            found.add((fp.get("code_commit"), fp.get("code_dirty"), fp.get("code_diff"), fp.get("script_sha256")))
        if files is not None and isinstance(fp.get("code_files"), dict):
            files.update(fp["code_files"])
    return found


def code_change(plan: Plan) -> str | None:
    """The warning when the code now differs from the code the sweep's runs ran; None when it does not (or when
    nothing was recorded). An entry task's script is compared through its commit and dirty flag only."""
    files: dict[str, str | None] = {}
    old = recorded_code(plan, files)
    edited = changed_files(files, plan.task.cwd)
    if not old and not edited:
        return None
    git = git_state(plan.task.cwd)
    diff = diff_sha256(plan.task.cwd) if git["dirty"] else None
    script = file_sha256(script_of(plan.task.command, plan.task.cwd)) if plan.task.command else None
    changed = []
    if old and git["commit"] not in {c for c, _, _, _ in old}:
        changed.append(f"commit {', '.join(sorted(str(c)[:12] for c, _, _, _ in old))} -> {str(git['commit'])[:12]}")
    elif old and (git["dirty"], diff) not in {(d, f) for _, d, f, _ in old}:
        changed.append("other uncommitted changes" if git["dirty"] else "the tree is clean now")
    if old and script is not None and script not in {s for _, _, _, s in old}:
        changed.append("the script changed")
    if edited:
        changed.append(f"project files changed: {', '.join(edited[:5])}" + (f" and {len(edited) - 5} more"
                                                                          if len(edited) > 5 else ""))
    if not changed:
        return None
    return (f"sweeper.extend=true onto changed code ({'; '.join(changed)}): the new seeds run other code than the "
            f"runs already there, and the report will call comparisons spanning both `mixed code`; run the whole "
            f"sweep on one code (a new sweeper.dir) to compare")
