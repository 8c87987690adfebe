import pytest

from sweeper.config.seeds import format_seeds, parse_seeds
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
