"""`glassformer exercises`: the graded path through both articles (the list), a stub to fill in
(`start N [DIR]`) and the check of a learner's file (`check N FILE`). The work is
`glassformer.exercises`'s; here are the arguments and the printing. A check runs the learner's
file in a process of its own (`exercises.sandbox`, with `--timeout`), prints what their code
printed (cut to a few lines), then its answer; it exits 0 when it passed, 1 when it did not (a
wrong value, or one line for whatever ended their code: an exception, sys.exit or os._exit, the
time limit, a crash, a flood of output, an answer that is not numbers); a usage error (or a check
that could not start its process) is one line and exit 2, as everywhere; Ctrl-C stops the check
and its process at once (exit 130).
"""

from __future__ import annotations

from glassformer.cli.common import overwrite_arg, real
from glassformer.errors import GlassformerError

EXIT_WRONG = 1
ACTIONS = ("list", "start", "check")


def add_parsers(sub) -> None:
    e = sub.add_parser(
        "exercises",
        help="a graded path of exercises through both articles, checked against the reference",
        description="Without an action: list the exercises (softmax ... a KV cache), with the "
        "article each comes from and whether its file exists here. `start N [DIR]` writes "
        "exercise N's stub (signature, equation, the article's words, no solution) to DIR "
        "(default: here). `check N FILE` runs FILE's function on the article's numbers and on "
        "random inputs, against the reference engine, and says where it first goes wrong: exit 0 "
        "when it passed, 1 when it did not.",
    )
    e.add_argument("action", nargs="?", choices=ACTIONS, default="list", help="list (default)")
    e.add_argument("number", nargs="?", metavar="N", help="the exercise's number")
    e.add_argument("path", nargs="?", metavar="DIR|FILE", help="start: a folder; check: a file")
    e.add_argument("--dir", default=".", help="list: the folder whose files are shown (.)")
    e.add_argument(
        "--timeout",
        type=real("--timeout", low=0, says="a positive number of seconds"),
        metavar="SECONDS",
        help="check: the time your file and function have, all cases together (default 5)",
    )
    overwrite_arg(e)
    e.set_defaults(func=cmd_exercises)


def cmd_exercises(args) -> int:
    from glassformer import exercises

    if args.timeout is not None and args.action != "check":
        raise GlassformerError(f"--timeout is a limit of exercises check, not of {args.action}")
    if args.action == "list":
        if args.number is not None:
            raise GlassformerError(
                "exercises takes no number without an action: start N [DIR] or check N FILE"
            )
        print(_listing(exercises, args.dir))
        return 0
    if args.number is None:
        what = "[DIR]" if args.action == "start" else "FILE"
        raise GlassformerError(f"exercises {args.action} needs N {what}: the exercise's number")
    ex = exercises.exercise(args.number)
    if args.action == "start":
        path = exercises.start(ex.number, args.path or ".", overwrite=args.overwrite)
        print(f"wrote {path}: exercise {ex.number}, {ex.title} ({ex.article})")
        print(f"fill in {ex.function}, then: glassformer exercises check {ex.number} {path}")
        return 0
    if args.path is None:
        raise GlassformerError(f"exercises check {ex.number} needs FILE: the file to check")
    from glassformer.exercises.sandbox import TIMEOUT, check_in_child

    timeout = TIMEOUT if args.timeout is None else args.timeout
    result = check_in_child(ex.number, args.path, timeout, more="--timeout SECONDS")
    if result.output:
        print(result.output, end="" if result.output.endswith("\n") else "\n")
    print(result.message)
    return 0 if result.passed else EXIT_WRONG


def _listing(exercises, folder: str) -> str:
    """One line per exercise: number, title, article, and its file when it exists in folder."""
    rows = exercises.catalogue()
    have = exercises.started(folder)
    width = max(len(ex.title) for ex in rows)
    art = max(len(ex.article) for ex in rows)
    lines = [f"{len(rows)} exercises through both articles, each checked against the reference:"]
    for ex in rows:
        status = f"{ex.filename} (started)" if have[ex.number] else ""
        lines.append(f"{ex.number:>3}  {ex.title:<{width}}  {ex.article:<{art}}  {status}".rstrip())
    lines.append(
        "start one: glassformer exercises start N [DIR]; check it: glassformer exercises check "
        "N FILE"
    )
    return "\n".join(lines)
