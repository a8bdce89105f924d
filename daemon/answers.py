"""The suggestion cache: recent completions per document, keyed by what decides their text.

Greedy decoding is a function of the prompt: the same prefix, suffix, other files and limits give
the same tokens, whichever drafter ran and however the KV cache got there (docs/architecture.md,
"How exactness is kept"). So an answer computed once is the target's own answer to every later
request with the same key: deleting back to where a suggestion was shown, returning to a position,
or pressing Tab on a suggestion whose accept branch was prefetched, answers at once without the
model. What is not in the key cannot change the text: the drafter and hints (lookup sources,
always verified), the request id, reuse of the KV cache. A time budget (completion.first_line_ms)
can end a completion early, at a line end: what is kept is then that shorter answer, still the
start of the target's own, and the one the user was shown.

Sampled completions are never kept: their text depends on the seed's draw, and a user who asks
again with temperature > 0 asks for another draw. Cancelled ones end mid-way and are not answers,
and neither is the empty reply of an inference server that could not answer.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import msgspec

from specd.decoding.request import Completion, CompletionRequest
from specd.decoding.stats import Stats

PER_DOCUMENT = 64     # a few minutes of pauses in one file
DOCUMENTS = 256       # documents with kept answers, least recently used out


def answer_key(request: CompletionRequest) -> bytes | None:
    """What decides the completion's text, hashed; None when no answer may be kept for it."""
    if not request.sampler.greedy or not request.reuse:   # reuse=False: a cold run, on purpose
        return None
    decided_by = (request.prefix, request.suffix, request.extras, request.max_tokens, request.single_line,
                  request.stop_at_suffix, request.suffix_tokens)
    return hashlib.blake2b(msgspec.msgpack.encode(decided_by), digest_size=16).digest()


class Answers:
    def __init__(self, per_document: int = PER_DOCUMENT, documents: int = DOCUMENTS):
        self.per_document, self.documents = per_document, documents
        self.kept: OrderedDict[str, OrderedDict[bytes, Completion]] = OrderedDict()

    def get(self, document: str, key: bytes | None) -> Completion | None:
        """The answer kept under `key` (answer_key's) for `document`, as a fresh Completion that
        says it came from here (no model work)."""
        answers = self.kept.get(document)
        if key is None or answers is None or (kept := answers.get(key)) is None:
            return None
        answers.move_to_end(key)
        self.kept.move_to_end(document)
        stats = Stats(prompt_tokens=kept.stats.prompt_tokens, from_cache=True)
        return Completion(kept.text, list(kept.tokens), kept.outcome, kept.stop_reason, stats)

    def put(self, document: str, key: bytes | None, result: Completion) -> None:
        if key is None or result.outcome != "done" or result.error is not None:
            return
        answers = self.kept.setdefault(document, OrderedDict())
        answers[key] = result
        answers.move_to_end(key)
        self.kept.move_to_end(document)
        while len(answers) > self.per_document:
            answers.popitem(last=False)
        while len(self.kept) > self.documents:
            self.kept.popitem(last=False)

    def __len__(self) -> int:
        return sum(len(answers) for answers in self.kept.values())
