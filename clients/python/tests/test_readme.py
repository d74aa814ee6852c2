"""The README's quickstart is the example the empty-project check runs
(scripts/empty-project-python.sh), word for word."""

from __future__ import annotations

import re

from servers import PACKAGE_DIR


def test_readme_quickstart_is_the_example() -> None:
    readme = (PACKAGE_DIR / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "no python block in the README"
    assert blocks[0] == (PACKAGE_DIR / "examples" / "quickstart.py").read_text()
