"""`specd heads train|show`: Medusa-style heads for the `heads` drafter, trained on this machine
on source text already here (models/heads.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from specd.cli.usage import UsageError
from specd.daemon.config import load_config


def add_parsers(sub) -> None:
    p = sub.add_parser("heads", help="train heads on the target for the `heads` drafter, or show the kept ones")
    p.add_argument("action", choices=["train", "show"])
    p.add_argument("--folder", type=Path, help="source files to train on (default: the Python standard "
                                               "library's and the installed packages')")
    p.add_argument("--heads", type=int, default=4, help="how many heads (each guesses one token further)")
    p.add_argument("--tokens", type=int, default=24_000, help="training tokens (and a tenth as many held back)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--fresh", action="store_true", help="discard a stopped run's work instead of resuming it")
    p.set_defaults(run=cmd_heads)


def cmd_heads(args) -> int:
    from specd.daemon.runtime import load_models
    from specd.models.heads import Plan, heads_record, train_heads

    if not 1 <= args.heads <= 8:
        raise UsageError(f"--heads must be 1..8, not {args.heads}")
    if args.tokens < 1000 or args.epochs < 1:
        raise UsageError("--tokens must be at least 1000 and --epochs at least 1")
    if args.folder is not None and not args.folder.is_dir():
        raise UsageError(f"--folder {args.folder}: not a folder")
    config = load_config(args.config)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    target, _ = load_models(config, progress=say)
    if target.device.type != "cpu":
        say(f"note: the heads draft where the target runs on a CPU; this one is on {target.device}")
    if args.action == "show":
        record = heads_record(config.cache_dir(), target)
        print(_describe(record) if record else f"no heads trained for {target.spec}: `specd heads train`")
        return 0 if record else 1
    plan = Plan(count=args.heads, tokens=args.tokens, epochs=args.epochs,
                folder=str(args.folder.resolve()) if args.folder else "")
    record = train_heads(target, config.cache_dir(), plan, say, fresh=args.fresh)
    print(_describe(record))
    return 0


def _describe(record: dict) -> str:
    accuracy = ", ".join(f"head {k + 1} {a:.2f}" for k, a in enumerate(record["accuracy"]))
    return (f"{record['count']} heads, trained on {record['train_tokens']} tokens in {record['seconds']:.0f} s "
            f"(reading and fitting, this run's part); top-1 = the target's own token on {record['held_tokens']} "
            f"held-back tokens: {accuracy}")
