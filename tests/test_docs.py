"""The documentation site (docs/, `make docs`): it builds with no warning, its generated reference
pages list everything the code defines, every link inside it leads somewhere, and the kernel's
help menu points at it."""
import argparse
import html
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from fcl.cli import _parser
from fcl_kernel import kernel as fcl_kernel
from fcl_kernel.magics import Magics

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # one Sphinx build, 10-30 s


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                             "html", str(ROOT / "docs"), str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return out


def text_of(page: Path) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).split())


def test_the_command_line_page_has_every_subcommand_and_option(site):
    page = text_of(site / "command-line.html")
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        assert f"fcl {name}" in page
        for action in sub._actions:
            for option in action.option_strings:
                assert option in page, (name, option)


def test_the_magics_page_has_every_magic_with_its_help(site):
    page = text_of(site / "magics.html")
    for kind, names in (("line", Magics.LINE), ("cell", Magics.CELL)):
        for name in names:
            assert ("%%" if kind == "cell" else "%") + name in page
            assert " ".join(getattr(Magics, f"{kind}_{name}").__doc__.split()) in page


def test_the_grammar_page_is_the_parsers_grammar(site):
    page = text_of(site / "grammar.html")
    rules = [line.split(":")[0].strip("?!") for line in
             (ROOT / "fcl" / "syntax" / "grammar.lark").read_text().splitlines()
             if re.match(r"[?!]?[a-z_]+\s*:", line)]
    assert rules and all(rule in page for rule in rules)


def test_the_course_page_lists_every_notebook(site):
    page = text_of(site / "course.html")
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        assert notebook.name in page


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        found = dict(attrs)
        if "id" in found:
            self.ids.add(found["id"])
        for name in ("href", "src"):
            if found.get(name):
                self.links.append(found[name])


def parsed(page: Path) -> Links:
    links = Links()
    links.feed(page.read_text())
    return links


def test_every_link_inside_the_site_leads_to_a_page_and_an_anchor_that_exist(site):
    checked = 0
    for page in site.glob("*.html"):
        for link in parsed(page).links:
            url = urlparse(link)
            if url.scheme or link.startswith("//"):
                continue  # another site: not checked offline
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            assert target.exists(), f"{page.name}: {link}"
            if url.fragment and target.suffix == ".html":
                assert url.fragment in parsed(target).ids, f"{page.name}: {link}"
            checked += 1
    assert checked > 100


def test_the_kernels_help_menu_opens_the_local_build(site, monkeypatch):
    monkeypatch.setattr(fcl_kernel, "LOCAL_DOCS", site)
    assert fcl_kernel.docs_url("language") == (site / "language.html").as_uri()
    monkeypatch.setattr(fcl_kernel, "LOCAL_DOCS", site / "missing")
    assert fcl_kernel.docs_url("language").startswith("https://")


def test_the_compiler_page_lists_every_step(site):
    from fcl.pipeline import stage_names
    page = text_of(site / "compiler.html")
    assert all(name in page for name in stage_names())
    assert "fcl compile --after STEP" in page and "%%steps" in page
