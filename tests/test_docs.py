"""The documentation a newcomer reads: a short README whose links all lead somewhere, and
the reference site in docs/, built the way `mkdocs build --strict` builds it."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)|<img src=\"([^\"]+)\"")


def anchors(page: Path) -> set[str]:
    """The anchors MkDocs gives a page's headings (its `toc` slugs)."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            found.add(re.sub(r"\s+", "-", title))
    return found


def test_the_reference_site_builds_with_no_broken_link_or_page_left_out(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", tmp_path / "site"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site/length-generalization/index.html").exists()


def test_every_link_in_the_readme_leads_to_a_file_and_heading_that_exist():
    targets = [a or b for a, b in LINK.findall((ROOT / "README.md").read_text())]
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert len(local) >= 10  # the pictures and the pages of the reference
    for target in local:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), target
        if anchor:
            assert anchor in anchors(ROOT / path), target


def test_the_readme_stays_a_five_minute_read():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_the_docs_send_no_reader_to_the_projects_issues_which_readers_cannot_see():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{page.name}: {match.group(0)}"
        for page in pages
        for match in re.finditer(r"\bissues? \d+", page.read_text(), re.IGNORECASE)
    ]
    assert found == []


def test_the_configuration_page_lists_every_key_as_the_config_declares_it():
    """docs/configuration.md's table of keys is made from their declaration
    (jabcli/core/settings.py), so the two cannot drift; JAB_PIN=write writes it."""
    from jabcli.core.settings import reference_table

    page = ROOT / "docs" / "configuration.md"
    table = re.compile(r"^\| key \|.*?(?=\n[^|]|\n?\Z)", re.MULTILINE | re.DOTALL)
    found = table.search(page.read_text())
    assert found, "docs/configuration.md has no table of keys"
    if os.environ.get("JAB_PIN") == "write":
        page.write_text(table.sub(lambda _: reference_table(), page.read_text(), count=1))
        found = table.search(page.read_text())
    assert found.group(0) == reference_table(), "the table differs: JAB_PIN=write writes it"


def test_every_reference_page_says_what_holds_in_at_most_400_lines():
    """The command reference may be longer; dated measurements live in docs/notes/."""
    long = [
        f"{page.name}: {len(page.read_text().splitlines())} lines"
        for page in sorted((ROOT / "docs").glob("*.md"))
        if page.name != "commands.md" and len(page.read_text().splitlines()) > 400
    ]
    assert long == []
