"""The domain to the letter (D3, D11, D12, D8): each fault found by the audit, on a
campaign file that shows it."""

from __future__ import annotations

from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.planning.advice import role_of
from cockpit.planning.schedule import plan_campaign
from tests.conftest import run_cockpit

HEAD = ('campaign: letter\nquestion: "Does variant-x raise accuracy by 0.01 over the control?"\n'
        "package: {offer: OFFER, start: 2026-12-02T08:00:00Z, count: COUNT}\n")


def _file(tmp_path: Path, stages: str, offer: str = "rtx4090-3d", count: int = 1,
          extra: str = "") -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(HEAD.replace("OFFER", offer).replace("COUNT", str(count))
                    + "stages:\n" + stages + extra)
    return path


def test_roles_come_from_the_role_key_or_an_exact_id(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: load-data, duration: 1h, resource: cpu}\n"
                           "  - {id: resume-writing, duration: 1h, resource: human}\n"
                           "  - {id: uncontrolled-sweep, duration: 1h, resource: gpu}\n"
                           "  - {id: data-check, duration: 1h, resource: cpu}\n"
                           "  - {id: baseline-a, duration: 1h, resource: gpu, role: control}\n")
    roles = {s.id: role_of(s) for s in load_campaign(path).stages}
    assert roles == {"load-data": None, "resume-writing": None, "uncontrolled-sweep": None,
                     "data-check": "data_check", "baseline-a": "control"}


def test_options_are_unique_save_something_and_are_not_dominated(tmp_path: Path) -> None:
    # notes runs beside the GPU work (dropping it saves nothing); variant-a is useful but
    # parallel to nothing it could shorten only with variant-x; nothing is listed twice.
    path = _file(tmp_path,
                 "  - {id: control, duration: 40h, resource: gpu}\n"
                 "  - {id: notes, duration: 5h, resource: human, category: exploratory}\n"
                 "  - {id: variant-x, duration: 40.0186h, resource: gpu, after: [control],"
                 " category: exploratory}\n")
    plan = plan_campaign(load_campaign(path))
    described = [o.describe() for o in plan.options]
    assert len(described) == len(set(described))
    shorten = [o for o in plan.options if o.kind == "shorten"]
    assert [o.drops for o in shorten] == [("variant-x",)]  # not "notes, variant-x", not "notes"
    assert all(o.saves_hours > 0 for o in plan.options if o.kind != "offer")
    assert "saves 40.02 h" in shorten[0].describe()  # rounded like every other figure


def test_no_options_says_so_and_why(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 60h, resource: gpu}\n"
                           "  - {id: variant-a, duration: 30h, resource: gpu, after: [control]}\n",
                 offer="b200-3d",
                 extra="offers:\n  - {id: b200-3d, gpu: B200, gpus: 2, days: 3, price: 500,"
                       " currency: USD}\n")
    out = run_cockpit("plan", str(path)).stdout
    assert "EXCEEDS" in out and "options (D11)" not in out
    assert "no option: the catalog has no longer B200 package and every stage is essential" in out
    status = run_cockpit("status", str(path)).stdout
    assert "see the options" not in status


def test_a_second_package_is_offered_for_independent_gpu_chains(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 40h, resource: gpu}\n"
                           "  - {id: variant-a, duration: 40h, resource: gpu}\n")
    plan = plan_campaign(load_campaign(path))
    (second,) = [o for o in plan.options if o.kind == "second-package"]
    assert second.moved == ("variant-a",) and second.saves_hours == 40 and second.fits
    text = second.describe()
    assert "47.14 USD more" in text and "environment allows" in text and "D12" in text


def test_prices_for_two_packages_say_so(tmp_path: Path) -> None:
    path = _file(tmp_path, "  - {id: control, duration: 90h, resource: gpu}\n", count=2)
    out = run_cockpit("plan", str(path)).stdout
    assert "94.28 USD for 2 packages" in out and "for the package" not in out
    assert "take rtx4090-7d (220 USD for 2 packages)" in out
