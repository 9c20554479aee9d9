"""Every Python example in the documentation runs (issue 31: "every Python example in docs/ runs
in the test command").

Each ```python block of README.md and docs/*.md runs in a fresh interpreter, in a temporary
folder, on two simulated A100s, after a prelude that defines the stand-ins the examples call
(:data:`STAND_INS`: the user's training code). Markers in the Markdown, as HTML comments (not
rendered), on the line just before a block:

- ``<!-- doc-example: skip: REASON -->``: the block needs what a test cannot have (a GPU, a
  server on the network, a library not installed here); the test skips, saying REASON.
- ``<!-- doc-example: file NAME -->`` before any other block (```json, ...): the block's text is
  written to NAME in the folder where the examples of that document run.

A block with neither runs, and must exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

from conftest import REPO, subprocess_env

# What the examples call that is the user's own code: small, fast and deterministic.
STAND_INS = r'''
import importlib.util, sys, time, types
if importlib.util.find_spec("torch") is None:
    # The examples synchronise through torch (ZeusMonitor's default): without it installed they
    # run as with a CPU-only torch.
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    sys.modules["torch"] = torch
def train_one_epoch(*args, **kwargs):
    time.sleep(0.01)
def train_one_step(*args, **kwargs):
    time.sleep(0.001)
def train_step(*args, **kwargs):
    time.sleep(0.001)
def evaluate(*args, **kwargs):
    return 0.5
def validate(*args, **kwargs):
    return 0.5
def train(batch_size, stop_above=None):
    return 100.0 + batch_size, True, 3   # cost, converged, epochs
epochs = 2
steps = 3
'''

MARKER = re.compile(r"<!--\s*doc-example:\s*(skip|file)\s*:?\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")


class Block(NamedTuple):
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: Optional[str]  # "skip" or "file"
    argument: str


def blocks_of(path: Path) -> List[Block]:
    found: List[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None or not fence.group(1):
            index += 1
            continue
        start = index
        body: List[str] = []
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        marker = MARKER.search(lines[start - 1]) if start > 0 else None
        found.append(Block(path, start + 1, fence.group(1), "\n".join(body) + "\n",
                           marker.group(1) if marker else None,
                           marker.group(2) if marker else ""))
        index += 1
    return found


def documents() -> List[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def python_blocks() -> List[Block]:
    return [block for path in documents() for block in blocks_of(path)
            if block.language == "python"]


def files_of(path: Path) -> Dict[str, str]:
    return {block.argument: block.text for block in blocks_of(path) if block.marker == "file"}


def test_the_docs_hold_python_examples() -> None:
    # The collection below must see the examples (a broken parser would skip them all).
    assert len(python_blocks()) >= 5


@pytest.mark.parametrize(
    "block", python_blocks(),
    ids=lambda block: f"{block.path.relative_to(REPO)}:{block.line}",
)
def test_python_example_runs(block: Block, tmp_path: Path) -> None:
    if block.marker == "skip":
        pytest.skip(f"{block.path.name}:{block.line}: {block.argument}")
    assert block.marker is None, f"{block.path.name}:{block.line}: a file marker on a python block"
    for name, text in files_of(block.path).items():
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-c", STAND_INS + block.text], cwd=str(tmp_path),
        env=subprocess_env({"ZEUS_SIMULATED_GPUS": "2:a100", "ZEUSD_SOCK_PATH": None,
                            "ZEUSD_HOST_PORT": None, "PYTHONWARNINGS": "ignore"}),
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, (
        f"{block.path.relative_to(REPO)}:{block.line} failed:\n{block.text}\n{result.stderr}"
    )


def test_markers_are_parsed(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- doc-example: file a.json -->\n```json\n{}\n```\n"
        "<!-- doc-example: skip: needs a GPU -->\n```python\nimport nothing\n```\n"
        "```python\nprint(1)\n```\n```\nplain\n```\n"
    )
    found = blocks_of(doc)
    assert [(b.language, b.marker, b.argument, b.line) for b in found] == [
        ("json", "file", "a.json", 2), ("python", "skip", "needs a GPU", 6),
        ("python", None, "", 9),
    ]
    assert files_of(doc) == {"a.json": "{}\n"}
