"""`specd models [list|pull]` and `specd config`: what the configuration names, and where it is."""

from __future__ import annotations

import sys
import time

from specd.cli.usage import UsageError
from specd.daemon.config import load_config, render


def add_parsers(sub) -> None:
    models = sub.add_parser("models", help="list the configured models; `pull` fetches the built-in pair")
    models.add_argument("action", nargs="?", choices=["list", "pull"], default="list")
    models.add_argument("--repair", action="store_true",
                        help="with pull: hash every cached file, rebuild a damaged cache from its source")
    models.set_defaults(run=cmd_models)
    sub.add_parser("config", help="print the effective configuration").set_defaults(run=cmd_config)


def cmd_models(args) -> int:
    from specd.models.info import info
    from specd.models.specs import parse_spec

    config = load_config(args.config)
    cache = config.cache_dir()
    if args.repair and args.action != "pull":
        raise UsageError("--repair goes with pull: `specd models pull --repair`")
    if args.action == "pull":
        pull_models(config, args.repair)
    print(f"{'role':7} {'converted':9} {'size':>9} {'params':>8} {'dtype':6} spec -> folder")
    for role in ("target", "draft"):
        spec = _fetched(getattr(config.models, role))
        if spec == "none":
            print(f"{role:7} {'-':9} {'-':>9} {'-':>8} {'-':6} none")
            continue
        i = info(parse_spec(spec, role), cache)
        params = f"{i.parameters / 1e9:.2f}B" if i.parameters else "-"
        print(f"{role:7} {'yes' if i.converted else 'no':9} {i.bytes_on_disk / 2**30:>7.2f}GB "
              f"{params:>8} {i.dtype or '-':6} {i.spec} -> {i.folder}")
    return 0


def pull_models(config, repair: bool = False) -> None:
    """Fetch, check and convert the configured built-in models that are not in the cache yet (with
    `repair`: hash every cached file and rebuild a damaged one); progress on stderr."""
    from specd.models.manifest import BUILTIN_BY_NAME
    from specd.models.resolve import pull_builtin
    from specd.models.resolve import repair as repair_cache
    from specd.models.specs import cached_folder

    cache = config.cache_dir()
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    for role, spec, parsed in _configured(config):
        started = time.perf_counter()
        if repair and cached_folder(parsed, cache) is None:
            print(f"{role}: {spec} is not a cache specd made; nothing to repair")
        elif repair:
            print(f"{role}: {repair_cache(parsed, cache, say)} ({time.perf_counter() - started:.1f} s)")
        elif parsed.kind == "builtin":
            folder = pull_builtin(BUILTIN_BY_NAME[parsed.ref], cache, say=say)
            print(f"{role}: {parsed.ref} ready in {folder} ({time.perf_counter() - started:.1f} s)")


def missing_builtins(config) -> list[str]:
    """The configured built-in models (the draft "auto" included) not yet converted in the cache."""
    from specd.models.resolve import not_pulled

    return not_pulled([parsed for _, _, parsed in _configured(config)], config.cache_dir())


def _configured(config) -> list:
    """(role, spec, parsed spec) of each configured model, as fetched (none: left out)."""
    from specd.models.specs import parse_spec

    roles = [(role, _fetched(getattr(config.models, role))) for role in ("target", "draft")]
    return [(role, spec, parse_spec(spec, role)) for role, spec in roles if spec != "none"]


def _fetched(spec: str) -> str:
    """draft = "auto" is the built-in draft: fetched with the target, so that a drafter that uses
    it can be chosen later without a download, though the daemon loads it only then."""
    return "builtin" if spec == "auto" else spec


def cmd_config(args) -> int:
    print(render(load_config(args.config)), end="")
    return 0
