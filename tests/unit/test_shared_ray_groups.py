"""The test suite's own scheduling (tests/shared_ray.py): the modules on the shared Ray are
dealt into GROUPS xdist groups, every other module is a group of its own."""

from pathlib import Path

from tests import shared_ray


def test_shared_modules_are_dealt_in_path_order_and_others_keep_a_group_each():
    shared = [Path(f"/t/test_{c}.py") for c in "abcde"]
    rank = {p: n for n, p in enumerate(sorted(shared))}
    groups = [shared_ray.group_of(p, rank, f"tests/{p.name}") for p in shared]
    assert groups == [f"shared-ray-{n % shared_ray.GROUPS}" for n in range(5)]
    assert len(set(groups)) == min(shared_ray.GROUPS, 5)  # every group gets modules
    others = [shared_ray.group_of(Path(f"/t/unit_{c}.py"), rank, f"tests/unit_{c}.py") for c in "xy"]
    assert others == ["tests/unit_x.py", "tests/unit_y.py"]  # one group per module, as loadfile
    assert not any("@" in g for g in groups + others)  # xdist splits the test id at the last "@"
