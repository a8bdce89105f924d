"""`specd start | stop | status`: the daemon's life, from the command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from specd.cli.models_cmds import missing_builtins, pull_models
from specd.daemon import protocol
from specd.daemon.config import load_config
from specd.daemon.lifecycle import answering_pid, daemon_status, launch_daemon, stop_daemon
from specd.daemon.paths import Paths
from specd.daemon.process import lock_holder


def add_parsers(sub) -> None:
    start = sub.add_parser("start", help="start the daemon (in the background) and wait until it answers")
    start.add_argument("--foreground", action="store_true", help="run the daemon in this process")
    start.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # where `specd start` reads the notes
    start.set_defaults(run=cmd_start)
    sub.add_parser("stop", help="stop the daemon: cancel what is in flight, remove its socket"
                   ).set_defaults(run=cmd_stop)
    sub.add_parser("status", help="pid, uptime, models, memory, requests, reuse, acceptance, latency"
                   ).set_defaults(run=cmd_status)


def cmd_start(args) -> int:
    config = load_config(args.config)
    where = Paths.of(config).socket
    if args.foreground:
        from specd.daemon.process import run_daemon

        if (pid := asyncio.run(answering_pid(config))) is not None:
            print(f"specd is already running (pid {pid}, socket {where})")
            return 0
        return run_daemon(config, args.ready_fd)
    started = time.monotonic()
    say = lambda line: print(f"specd: {line}", file=sys.stderr, flush=True)  # noqa: E731
    if config.backend.kind == "local" and (missing := missing_builtins(config)):
        # here, with pip's progress bars on this terminal, not in the background daemon: a
        # download of ~1.5 GB is no model load to wait for behind start_timeout_s
        say(f"first start: fetching the built-in models once ({', '.join(missing)}), as `specd models pull`")
        pull_models(config)
    pid, already = asyncio.run(launch_daemon(config, say=say))
    if already:
        print(f"specd is already running (pid {pid}, socket {where})")
    else:
        print(f"specd started (pid {pid}, socket {where}) in {time.monotonic() - started:.1f} s")
    return 0


def cmd_stop(args) -> int:
    pid, cancelled = asyncio.run(stop_daemon(load_config(args.config)))
    if pid is None:
        print("specd is not running")
    else:
        print(f"specd stopped (pid {pid}" + (f"; {cancelled} requests cancelled)" if cancelled else ")"))
    return 0


def cmd_status(args) -> int:
    config = load_config(args.config)
    status = asyncio.run(daemon_status(config))
    if status is None:
        pid = lock_holder(Paths.of(config).pid)
        print("specd is not running" if pid is None else f"specd is starting (pid {pid})")
        return 1
    print(render_status(status))
    return 0


def render_status(s: protocol.Status) -> str:
    share = lambda x: "-" if x is None else f"{x:.0%}"  # noqa: E731
    ms = lambda x: "-" if x is None else f"{x:.0f} ms"  # noqa: E731
    running = sum(a.state == "running" for a in s.active)
    tcp = f", tcp 127.0.0.1:{s.tcp_port}" if s.tcp_port else ""
    acceptance = ", ".join(f"{name} {rate:.2f}" for name, rate in sorted(s.acceptance.items())) or "-"
    return "\n".join([
        f"specd {s.version}: running, pid {s.pid}, up {_duration(s.uptime_s)}",
        f"socket    {s.socket}{tcp}",
        f"models    target {s.target}, draft {s.draft}; {s.device}, {s.dtype}",
        f"device    {s.device}: {s.device_reason or '-'}",
        f"memory    {s.rss_mb:.0f} MB resident; KV caches {s.cache_mb:.1f} MB for {s.cache_documents} documents",
        f"requests  {s.served} served, {s.cancelled} cancelled, {s.errors} errors; "
        f"{running} running, {len(s.active) - running} queued; {s.forward_passes} forward passes",
        f"reuse     {share(s.reuse)} of prompt tokens came from the cache; {s.from_cache} answers kept "
        f"from before (suggestion cache), {s.prefetched} accept branches prefetched",
        f"accepted  {acceptance} (drafted tokens the target kept)",
        f"taken     since start: {s.uptake.summary()}",
        f"          last hour: {s.uptake_hour.summary()}; by language: {_languages(s.uptake_languages)}",
        f"latency   p50 {ms(s.p50_ms)}, p95 {ms(s.p95_ms)} (time to result)",
        f"passes    ms by width: {s.curve.summary() if s.curve else '-'}",
    ])


def _languages(uptake: dict[str, protocol.Uptake]) -> str:
    """Each language's suggestions taken of those shown, the most shown first."""
    ranked = sorted(uptake.items(), key=lambda item: (-item[1].shown, item[0]))
    return ", ".join(f"{name} {u.taken}/{u.shown} ({u.rate()})" for name, u in ranked) or "-"


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s"
