"""The rules that choose how many drafted tokens a pass verifies, on hand-made cost curves: pure
functions of the curve and the tokens' probabilities, so nothing here is timed."""

from __future__ import annotations

import pytest

from specd.decoding.curve import CostCurve
from specd.decoding.policy import DraftStop, PassCosts, best_length, expected, widest_useful
from tests.conftest import CHEAP, STEEP, hand_curve


def costs(shape, low: int = 1, width: int = 16) -> PassCosts:
    return PassCosts.of(hand_curve(shape), low, width)


def test_expected_tokens_count_a_token_only_where_every_one_before_it_is_accepted():
    assert expected([]) == [1.0]
    assert expected([0.5, 0.5, 1.0]) == [1.0, 1.5, 1.75, 2.0]


def test_a_pass_is_costed_at_the_width_it_is_padded_to():
    c = costs(STEEP, low=4, width=8)
    assert c.verify_ms == (225, 225, 225, 225, 300, 385, 390, 400) and c.token_ms == 58 and c.longest == 7


@pytest.mark.parametrize("p", [0.5, 0.8])
def test_dear_wide_passes_verify_a_short_proposal_and_cheap_ones_a_long_one(p):
    steep, cheap = best_length([p] * 15, costs(STEEP)), best_length([p] * 15, costs(CHEAP))
    assert 1 <= steep <= 3 and cheap >= 2 * steep


def test_a_sure_proposal_is_verified_further_than_an_unsure_one():
    c = costs(STEEP)
    assert 0 < best_length([0.3] * 15, c) < best_length([0.8] * 15, c) < best_length([0.95] * 15, c) == 7
    assert best_length([0.95] * 15, costs(CHEAP)) == 15


def test_drafting_counts_against_length():
    c = costs(CHEAP)
    assert best_length([0.9] * 15, c, token_ms=20.0) < best_length([0.9] * 15, c, token_ms=0.0)


def test_the_draft_drafts_on_while_the_next_token_would_pay():
    steep, cheap = DraftStop(costs(STEEP)), DraftStop(costs(CHEAP))
    sure = [0.95] * 15
    steep_drafted, steep_kept = steep.kept(sure)
    cheap_drafted, cheap_kept = cheap.kept(sure)
    assert steep_kept <= steep_drafted < cheap_drafted and steep_kept < cheap_kept
    assert cheap.kept([0.95, 0.95, 0.01, 0.99, 0.99]) == (3, 2), "an unlikely token ends it, and is not verified"


def test_the_confidence_floor_ends_a_proposal_the_costs_would_go_on_with():
    cheap, floored = DraftStop(costs(CHEAP)), DraftStop(costs(CHEAP), confidence=0.5)
    probs = [0.8] * 15
    assert cheap.kept(probs)[0] > 4 and floored.kept(probs)[0] == 4  # 0.8^4 = 0.41 < 0.5
    assert DraftStop(costs(CHEAP), confidence=0.5, cumulative=False).kept(probs)[0] > 4


def test_no_pass_wider_than_can_pay_is_run():
    assert widest_useful(costs(CHEAP)) == 16
    assert 4 <= widest_useful(costs(STEEP)) <= 8
    assert widest_useful(PassCosts((100.0, 1000.0))) == 1


def test_the_curve_in_one_line():
    curve = hand_curve(STEEP)
    assert curve.summary() == "target 1:180 2:198 4:225 8:400 16:790; draft 1:58 2:58 4:58 8:58 16:58"
    assert CostCurve((95.0, 97.0, 99.0)).summary() == "target 1:95 2:97 3:99"
