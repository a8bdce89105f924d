"""`specd replay`: an editor played against `specd lsp` (tiny models, a daemon of its own)."""

from __future__ import annotations

import pytest

from specd.lsp.replay import Replay, cut, replay, specd_command

SOURCE = "def area(width, height):\n    return width * height\n\n\ndef perimeter(width, height):\n    return 2 * (width + height)\n"


def test_cut_keeps_the_text_after_the_typed_characters():
    before, typed, after = cut(SOURCE, 6, 5, 6)
    assert before.endswith("(width, height):\n    ") and typed == "return" and after.startswith(" 2 * (")
    with pytest.raises(ValueError, match="outside"):
        cut(SOURCE, 60, 1, 3)
    with pytest.raises(ValueError, match="characters follow"):
        cut(SOURCE, 6, 5, 500)


@pytest.mark.parametrize("reuse_and_cancel", [True, False], ids=["default", "no-reuse-no-cancel"])
async def test_replay_reports_what_the_keyboard_felt(specd_env, tmp_path, reuse_and_cancel):
    file = tmp_path / "shapes.py"
    file.write_text(SOURCE)
    job = Replay(file, 6, 5, chars=6, cps=20, reuse=reuse_and_cancel, cancel=reuse_and_cancel, timeout_s=120)
    env = {**__import__("os").environ, **specd_env.env}
    outcome = await replay(job, specd_command(), specd_env.paths().trace, env=env)
    report = outcome.report()
    assert report["sent"] == 6
    assert [s.truth for s in outcome.sent][0].startswith("eturn 2 * (")
    assert outcome.sent[-1].answered_at is not None, "the last keystroke's request is answered"
    assert 0 <= report["answered"] <= 6 and report["answered_share"] == round(report["answered"] / 6, 3)
    if report["answered"]:
        assert report["p50_ms"] <= report["p95_ms"]
    if reuse_and_cancel:
        assert report["cancelled_by_client"] >= 1
    else:
        assert report["cancelled_by_client"] == 0
        assert report["model_s_cancelled"] == 0.0, "nothing is cancelled when cancelling is off"
    assert report["model_s_done"] > 0
