"""Training the `heads` drafter's heads (decoding/heads.py) on this machine, and keeping them.

`train_heads` runs in three phases, each resumable, on source text the user already has:

1. `read`: the target reads windows of the text (the files of a folder, or by default the Python
   standard library's and the installed packages'), keeping each row's final hidden state and
   the target's own next token: the features. Written in shards, so a stopped run resumes at
   the last shard.
2. `fit`: the heads learn from those features (the target frozen, never run again), with a
   checkpoint every `CHECKPOINT_S` seconds and at a stop.
3. `score`: top-1 accuracy per head on held-back files (one in ten, by name), and the heads are
   kept in `<cache>/heads/`, keyed by the target's weight files and how they run; a changed
   target finds none and trains again. The features stay (a fit with other settings reads
   nothing again) until a run of another reading plan, or `--fresh`; a fit's checkpoint goes
   once its heads are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from specd.decoding.errors import UserError
from specd.decoding.heads import Heads
from specd.decoding.kvcache import KVCache
from specd.decoding.lean import Lean
from specd.decoding.loaded import LoadedModel, ModelError
from specd.models.load import THREADS
from specd.models.measured import model_stamp, write_atomic
from specd.models.quantize import read_cached, write_cached

log = logging.getLogger("specd.models")

SOURCES = {".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".java",
           ".kt", ".cs", ".rb", ".php", ".swift", ".scala", ".lua", ".sh", ".sql", ".zig"}
CHECKPOINT_S = 30.0
SHARD_S = 20.0
HELD = 10            # one file in HELD is held back for the score
SHORTEST = 64        # tokens of the shortest window kept
CHUNK = 128          # tokens the target reads per pass (the engine's prefill chunk)
DECAY = 0.8          # head k's loss weighs DECAY ** (k - 1): the later heads are right less often (Medusa)


@dataclass(frozen=True)
class Plan:
    """What a run trains on and how; a run resumes only the work of the same plan."""
    count: int = 4          # heads
    tokens: int = 24_000    # training tokens (and a tenth as many held back)
    window: int = 512       # tokens the target reads at once
    vocab: int = 8192       # output rows the heads read
    epochs: int = 2
    batch: int = 128
    lr: float = 1e-3
    folder: str = ""        # "" for the Python standard library and installed packages
    seed: int = 0


class Stopped(UserError):
    """The run was stopped (Ctrl-C); its work is kept and the next run resumes it."""


def heads_path(cache_dir: Path, target: LoadedModel) -> Path:
    key = hashlib.sha256(json.dumps([model_stamp(target.folder, target.weights), str(target.dtype)],
                                    default=str).encode()).hexdigest()[:16]
    return cache_dir / "heads" / f"{target.folder.name}-{key}.safetensors"


def load_heads(cache_dir: Path, target: LoadedModel) -> Heads | None:
    """The heads trained for this target, or None (none trained, or a file that does not fit it)."""
    path = heads_path(cache_dir, target)
    tensors = read_cached(path)
    if tensors is None:
        return None
    try:
        return _heads_from(tensors, target)
    except (KeyError, RuntimeError, AssertionError) as error:
        log.warning("%s does not fit %s (%s); `specd heads train` makes new ones", path, target.spec, error)
        return None


def heads_record(cache_dir: Path, target: LoadedModel) -> dict | None:
    """What `train_heads` wrote of the kept heads: accuracy, tokens, time."""
    from safetensors import safe_open

    path = heads_path(cache_dir, target)
    if not path.is_file():
        return None
    with safe_open(str(path), "pt") as f:
        return json.loads((f.metadata() or {}).get("record", "{}"))


def train_heads(target: LoadedModel, cache_dir: Path, plan: Plan, say: Callable[[str], None],
                fresh: bool = False) -> dict:
    """Train `plan.count` heads for `target` and keep them; returns the record kept with them."""
    final = heads_path(cache_dir, target)
    work = final.with_name(f"{final.stem}-{_key(plan, READING)}.features")
    if fresh and work.exists():
        shutil.rmtree(work)
    _start_work(work, say)
    started = time.perf_counter()
    train_windows, held_windows = corpus_windows(target.tokenizer, plan, say)
    try:
        read("train", target, train_windows, work, say)
        read("held", target, held_windows, work, say)
    except KeyboardInterrupt:
        raise Stopped("stopped while reading the text; `specd heads train` with the same options resumes "
                      "at the last shard kept") from None
    train_rows, held_rows = _load_features(work, "train"), _load_features(work, "held")
    vocab = top_tokens(train_rows[1], plan.vocab)
    heads = Heads(plan.count, train_rows[0].shape[1], vocab, output_rows(target.model, vocab))
    checkpoint = work / f"fit-{_key(plan, FITTING)}.pt"
    fit(heads, train_rows, plan, checkpoint, say)
    accuracy = score(heads, held_rows, plan.count)
    record = {"count": plan.count, "train_tokens": int(train_rows[0].shape[0]),
              "held_tokens": int(held_rows[0].shape[0]), "accuracy": accuracy, "vocab": len(vocab),
              "seconds": round(time.perf_counter() - started, 1), "plan": asdict(plan)}
    write_cached(final, {k: v.contiguous() for k, v in heads.state_dict().items()}, {"record": json.dumps(record)})
    checkpoint.unlink(missing_ok=True)
    return record


READING = ("tokens", "window", "folder", "seed")           # what the features depend on
FITTING = ("count", "vocab", "epochs", "batch", "lr", "seed")  # and what a fit's checkpoint does


def _key(plan: Plan, fields: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([getattr(plan, f) for f in fields]).encode()).hexdigest()[:12]


def _start_work(work: Path, say: Callable[[str], None]) -> None:
    """The features folder of this reading plan, kept between runs (a fit with other settings
    reads nothing again); another plan's folder for the same target goes."""
    for other in work.parent.glob(f"{work.name.rsplit('-', 1)[0]}-*.features"):
        if other != work:
            say(f"removing {other}: the features of another reading plan")
            shutil.rmtree(other)
    if work.exists():
        say(f"using the features kept in {work}")
    work.mkdir(parents=True, exist_ok=True)


def corpus_files(folder: str) -> list[Path]:
    """Source files under `folder`, or the Python standard library's and the installed packages'."""
    roots = [Path(folder)] if folder else sorted({Path(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib")})
    for root in roots:
        if not root.is_dir():
            raise ModelError(f"{root} is not a folder of source files")
    files = sorted(p for root in roots for p in root.rglob("*")
                   if p.suffix in SOURCES and p.is_file() and 1_000 <= p.stat().st_size <= 200_000)
    if not files:
        raise ModelError(f"no source files ({', '.join(sorted(SOURCES))}) of 1-200 kB under "
                         f"{', '.join(map(str, roots))}")
    return files


def corpus_windows(tokenizer, plan: Plan, say: Callable[[str], None]) -> tuple[list[list[int]], list[list[int]]]:
    """Windows of the files' tokens, in a seeded order (the same for the same plan and files):
    up to two per file, training ones until `plan.tokens`, held-back ones (one file in HELD, by
    its name) until a tenth as many."""
    files = corpus_files(plan.folder)
    random.Random(plan.seed).shuffle(files)
    train: list[list[int]] = []
    held: list[list[int]] = []
    counts, budgets = [0, 0], [plan.tokens, plan.tokens // HELD]
    full = [False, False]  # no room for another window of the shortest kept
    for path in files:
        is_held = int(hashlib.sha256(path.name.encode()).hexdigest(), 16) % HELD == 0
        budget = budgets[is_held]
        full[is_held] = counts[is_held] + SHORTEST > budget
        if all(full):
            break
        if full[is_held]:
            continue
        try:
            ids = tokenizer(path.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
        except (UnicodeDecodeError, OSError):
            continue
        for start in range(0, min(len(ids), 2 * plan.window), plan.window):
            piece = ids[start:start + plan.window][: budget - counts[is_held]]
            if len(piece) >= SHORTEST:
                (held if is_held else train).append(piece)
                counts[is_held] += len(piece)
    say(f"text: {counts[0]} training tokens in {len(train)} windows and {counts[1]} held back in {len(held)}, "
        f"of {len(files)} files")
    if counts[0] < 1000 or not held:
        raise ModelError(f"too little text to train on ({counts[0]} tokens, {len(held)} held-back windows); "
                         "name a bigger folder with --folder")
    return train, held


def read(part: str, target: LoadedModel, windows: list[list[int]], work: Path, say: Callable[[str], None]) -> None:
    """Phase 1: the target reads the windows (in chunks, as a prompt is read); each shard keeps
    their rows' hidden states and the target's next tokens. Shards already written are skipped."""
    done = sum(_windows_in(p) for p in work.glob(f"{part}-*.safetensors"))
    model = target.model
    lean = getattr(model, "specd_lean", None) or Lean(model)
    cache = KVCache(model, max(map(len, windows)))
    total = sum(map(len, windows))
    tokens_done = sum(map(len, windows[:done]))
    shard: dict[str, list[torch.Tensor]] = {"hidden": [], "targets": [], "lengths": []}
    clock, last = Clock(total - tokens_done), time.perf_counter()
    for i in range(done, len(windows)):
        ids = windows[i]
        cache.truncate(0)
        for start in range(0, len(ids), CHUNK):
            piece = ids[start:start + CHUNK]
            with torch.inference_mode():
                logits = lean(cache, piece, keep=len(piece))  # the next chunk runs after it in the cache
            assert cache.rows is not None
            shard["hidden"].append(cache.rows.hidden.to(torch.bfloat16).cpu())  # a GPU's read fits on the CPU
            shard["targets"].append(logits.argmax(-1).int().cpu())
        shard["lengths"].append(torch.tensor([len(ids)], dtype=torch.int32))
        tokens_done += len(ids)
        if time.perf_counter() - last > SHARD_S or i + 1 == len(windows):
            write_cached(work / f"{part}-{i:05d}.safetensors", {k: torch.cat(v) for k, v in shard.items()})
            shard = {k: [] for k in shard}
            last = time.perf_counter()
            say(f"reading {part}: {tokens_done}/{total} tokens, {clock.left(total - tokens_done)}")


def _windows_in(shard: Path) -> int:
    """How many windows a shard holds, read from its `lengths` alone."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(shard), "pt") as f:
            return int(f.get_slice("lengths").get_shape()[0])
    except (SafetensorError, OSError):
        raise ModelError(f"{shard} is unreadable; `specd heads train --fresh` starts over") from None


def _load_features(work: Path, part: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(hidden [N, E] float32, targets [N], window lengths)."""
    shards = [read_cached(p) for p in sorted(work.glob(f"{part}-*.safetensors"))]
    if any(s is None for s in shards):
        raise ModelError(f"a shard in {work} is unreadable; `specd heads train --fresh` starts over")
    return (torch.cat([s["hidden"] for s in shards]).float(), torch.cat([s["targets"] for s in shards]).long(),
            torch.cat([s["lengths"] for s in shards]).long())


def top_tokens(targets: torch.Tensor, n: int) -> torch.Tensor:
    """The `n` tokens the target predicted most often (fewer where it predicted fewer), by id."""
    counts = torch.bincount(targets)
    top = counts.argsort(descending=True)[:n]
    return top[counts[top] > 0].sort().values


@torch.inference_mode()
def output_rows(model: torch.nn.Module, vocab: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """The target's output layer's rows for `vocab` [V', E], float32: its outputs for the unit
    vectors, which works for whatever kind of weights the layer holds."""
    hidden = model.config.hidden_size
    dtype = model.model.norm.weight.dtype
    rows = []
    for start in range(0, hidden, chunk):
        unit = torch.eye(hidden, dtype=dtype, device=model.device)[start:start + chunk]
        rows.append(model.lm_head(unit)[:, vocab.to(model.device)].float().cpu())
    return torch.cat(rows).T.contiguous()


def labels(targets: torch.Tensor, lengths: torch.Tensor, count: int) -> torch.Tensor:
    """[N, K]: head k's label at row i, the target's token after row i + k (-1 past a window's end)."""
    out = torch.full((len(targets), count), -1, dtype=torch.long)
    start = 0
    for n in lengths.tolist():
        for k in range(1, count + 1):
            if n > k:
                out[start:start + n - k, k - 1] = targets[start + k:start + n]
        start += n
    return out


def fit(heads: Heads, rows: tuple[torch.Tensor, torch.Tensor, torch.Tensor], plan: Plan, checkpoint: Path,
        say: Callable[[str], None]) -> None:
    """Phase 2: minibatches of rows, shuffled per epoch with a seed; resumes from `checkpoint`."""
    hidden, targets, lengths = rows
    index_of = torch.full((int(max(targets.max(), heads.vocab.max())) + 1,), -1, dtype=torch.long)
    index_of[heads.vocab] = torch.arange(len(heads.vocab))
    wanted = labels(targets, lengths, heads.count)
    wanted = torch.where(wanted >= 0, index_of[wanted.clamp(min=0)], -1)      # -1: past the end, or not in vocab
    weights = torch.tensor([DECAY ** k for k in range(heads.count)])
    optimizer = torch.optim.AdamW(heads.blocks.parameters(), lr=plan.lr, weight_decay=0.0)
    steps_per_epoch = -(-len(hidden) // plan.batch)
    epoch, step = 0, 0
    if checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=True)
        heads.blocks.load_state_dict(state["blocks"])
        optimizer.load_state_dict(state["optimizer"])
        epoch, step = state["epoch"], state["step"]
        say(f"fitting: resumed at epoch {epoch + 1}, step {step}/{steps_per_epoch}")
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)  # block weights leave torch one thread; the heads are torch's alone
    total = plan.epochs * steps_per_epoch
    clock, saved, shown = Clock(total - epoch * steps_per_epoch - step), time.perf_counter(), time.perf_counter()
    try:
        while epoch < plan.epochs:
            order = torch.randperm(len(hidden), generator=torch.Generator().manual_seed(plan.seed + epoch))
            while step < steps_per_epoch:
                batch = order[step * plan.batch:(step + 1) * plan.batch]
                logits = heads(hidden[batch])                                       # [B, K, V']
                losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), wanted[batch], ignore_index=-1,
                                                           reduction="none")        # [B, K]
                valid = (wanted[batch] >= 0).float()
                loss = ((losses * valid).sum(0) / valid.sum(0).clamp(min=1) * weights).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                now = time.perf_counter()
                if now - shown > 10 or step == steps_per_epoch:
                    left = total - epoch * steps_per_epoch - step
                    say(f"fitting: epoch {epoch + 1}/{plan.epochs}, step {step}/{steps_per_epoch}, "
                        f"loss {loss.item():.2f}, {clock.left(left)}")
                    shown = now
                if now - saved > CHECKPOINT_S:
                    _checkpoint(checkpoint, heads, optimizer, epoch, step)
                    saved = now
            epoch, step = epoch + 1, 0
    except KeyboardInterrupt:
        _checkpoint(checkpoint, heads, optimizer, epoch, step)
        raise Stopped(f"stopped at epoch {epoch + 1}, step {step}; `specd heads train` with the same options "
                      "resumes") from None
    finally:
        torch.set_num_threads(threads)


def _checkpoint(path: Path, heads: Heads, optimizer, epoch: int, step: int) -> None:
    import io

    buffer = io.BytesIO()
    torch.save({"blocks": heads.blocks.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "step": step}, buffer)
    write_atomic(path, buffer.getvalue())


@torch.inference_mode()
def score(heads: Heads, rows: tuple[torch.Tensor, torch.Tensor, torch.Tensor], count: int) -> list[float]:
    """Phase 3: per head, how often its top token is the target's own on the held-back rows."""
    hidden, targets, lengths = rows
    wanted = labels(targets, lengths, count)
    right = torch.zeros(count)
    seen = (wanted >= 0).sum(0).clamp(min=1)
    for start in range(0, len(hidden), 256):
        guess = heads.vocab[heads(hidden[start:start + 256]).argmax(-1)]        # [B, K]
        right += (guess == wanted[start:start + 256]).sum(0)
    return [round(float(r / s), 4) for r, s in zip(right, seen)]


def _heads_from(tensors: dict[str, torch.Tensor], target: LoadedModel) -> Heads:
    count = sum(1 for name in tensors if name.startswith("blocks.") and name.endswith(".weight"))
    vocab, out = tensors["vocab"], tensors["out"]
    hidden = target.model.config.hidden_size
    assert out.shape[1] == hidden and int(vocab.max()) < len(target.tokenizer), "made for another target"
    heads = Heads(count, hidden, vocab, out)
    heads.load_state_dict(tensors)
    return heads.eval()


class Clock:
    """Time left, from the rate so far."""

    def __init__(self, work: int):
        self.work, self.started = max(work, 1), time.perf_counter()

    def left(self, remaining: int) -> str:
        done = self.work - remaining
        if done <= 0:
            return "time left not known yet"
        seconds = (time.perf_counter() - self.started) / done * remaining
        return f"~{seconds / 60:.1f} min left" if seconds >= 90 else f"~{seconds:.0f} s left"
