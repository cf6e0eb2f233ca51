"""docs/training-scripts.md has one tested section per framework (issue 42): the one
line each section tells a reader to add is the line the tests run with the real library
and the line `cockpit init --framework` writes, and the tests the section names exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training-scripts.md"
SECTIONS = {  # heading -> (the call the reader adds, the tested scripts holding it)
    "Hugging Face Trainer": ("add_callback(CockpitCallback())", (
        "tests/e2e/test_integration_hf.py", "cockpit/assets/templates/init_hf/train.py")),
    "PyTorch Lightning": ("callbacks=[CockpitCallback()]", (
        "tests/e2e/test_integration_lightning.py",
        "cockpit/assets/templates/init_lightning/train.py")),
}


def section(heading: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_the_one_line_of_each_section_is_the_tested_one(heading: str) -> None:
    call, scripts = SECTIONS[heading]
    body = section(heading)
    (code,) = re.findall(r"```python\n(.*?)```", body, re.S)[:1]
    imports = [line for line in code.splitlines() if line.startswith("from cockpit.")]
    assert len(imports) == 1 and call in code, code
    for script in scripts:
        source = (ROOT / script).read_text()
        assert imports[0] in source, (script, imports[0])
        assert call in source, (script, call)
    named = set(re.findall(r"`(tests/e2e/test_[a-z_]+\.py)`", body))
    assert {s for s in scripts if s.startswith("tests/")} <= named, named
    assert all((ROOT / test).is_file() for test in named), named
