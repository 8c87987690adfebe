import pytest

from sweeper.config.seeds import Seeds, format_seeds, parse_seeds
from sweeper.errors import UsageError


@pytest.mark.parametrize("value, expected", [
    ("0-3", [0, 1, 2, 3]), ("5-5", [5]), (" 2 - 4 ", [2, 3, 4]), ([0, 2, 5], [0, 2, 5]), ((9, 1), [9, 1]),
    (7, [7]), ("7", [7]), (0, [0]),
])
def test_good_forms(value, expected):
    assert parse_seeds(value) == expected


@pytest.mark.parametrize("value", ["3-1", "a-b", -1, "-1", [1, 1], [], "", "1,2", 1.5, True, [0, -2], ["a"], None,
                                   "0-", "0--3"])
def test_bad_forms_name_value_and_accepted_forms(value):
    with pytest.raises(UsageError) as e:
        parse_seeds(value)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("seeds=")
    assert "seeds=0-3" in msg and "seeds=[0,2,5]" in msg and "seeds=7" in msg


def test_format_round_trips():
    for seeds in ([0, 1, 2, 3], [4], [0, 2, 5]):
        assert parse_seeds(format_seeds(seeds) if "-" in format_seeds(seeds) or "[" not in format_seeds(seeds)
                           else eval(format_seeds(seeds))) == seeds


# -- issue 41: one typed value, parsed once (sweeper.config.seeds.Seeds) ------------------------------------------


def test_a_huge_range_is_counted_in_constant_time_never_built():
    import time

    t0 = time.perf_counter()
    seeds = Seeds.parse("0-1000000000000")
    big = Seeds.parse(f"0-{2 ** 63 - 1}")
    assert seeds.count == 1000000000001 and big.count == 2 ** 63        # len() of that range would overflow
    assert seeds.first == 0 and str(seeds) == "0-1000000000000"
    assert time.perf_counter() - t0 < 0.1                               # building it would take hours


@pytest.mark.parametrize("value, count, text", [
    ("0-3", 4, "0-3"), ([5, 6, 7], 3, "5-7"), ([0, 2, 5], 3, "[0,2,5]"), (7, 1, "7"), ((9, 1), 2, "[9,1]"),
])
def test_typed_seeds_count_list_and_print_back(value, count, text):
    seeds = Seeds.parse(value)
    assert seeds.count == count and seeds.to_list() == parse_seeds(value) and str(seeds) == text
    assert Seeds.parse(text if "[" not in text else eval(text)) == seeds == Seeds.of(seeds.to_list())


def test_adaptive_is_a_seeds_value_but_no_list():
    seeds = Seeds.parse(" adaptive ")
    assert seeds.adaptive and str(seeds) == "adaptive"
    for use in (lambda: seeds.count, lambda: seeds.first, seeds.to_list,
                lambda: Seeds.parse("adaptive", adaptive=False), lambda: parse_seeds("adaptive")):
        with pytest.raises(UsageError, match=r"^seeds=adaptive is not a seed list"):
            use()


@pytest.mark.parametrize("value", ["3-1", "a-b", -1, [1, 1], [], 1.5, True, None, f"0-{2 ** 63}", "1" * 30])
def test_typed_seeds_refuse_what_parse_seeds_refuses_with_the_same_line(value):
    with pytest.raises(UsageError) as typed:
        Seeds.parse(value)
    with pytest.raises(UsageError) as listed:
        parse_seeds(value)
    assert str(typed.value) == str(listed.value) and str(typed.value).startswith("seeds=")
