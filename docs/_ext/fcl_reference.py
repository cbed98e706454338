"""Reference pages generated from FCL's own code, so that they cannot drift from it: the `fcl`
command's options from its argument parser, the kernel's magics from the docstrings that `%magic`
shows, the compiler's steps from their list (fcl.steps), and the course from the notebooks'
titles."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from fcl.cli import _parser
from fcl.pipeline import stage_purposes
from fcl_kernel.magics import Magics

ROOT = Path(__file__).resolve().parents[2]


def _section(directive: SphinxDirective, title: str, ident: str) -> nodes.section:
    section = nodes.section(ids=[nodes.make_id(ident)])
    section += nodes.title(text=title)
    return section


class CommandLine(SphinxDirective):
    """Each subcommand of `fcl`, with its usage and every option's help."""

    def run(self) -> list[nodes.Node]:
        parser = _parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        helps = {choice.dest: choice.help for choice in commands._choices_actions}
        found: list[nodes.Node] = []
        for name, sub in commands.choices.items():
            section = _section(self, f"fcl {name}", f"fcl-{name}")
            section += nodes.paragraph(text=(helps.get(name) or "").capitalize() + ".")
            section += nodes.literal_block(text=sub.format_help())
            found.append(section)
        return found


class KernelMagics(SphinxDirective):
    """Every line and cell magic of the FCL kernel, with the text `%magic NAME` shows."""

    def run(self) -> list[nodes.Node]:
        found: list[nodes.Node] = []
        for kind, names in (("line", Magics.LINE), ("cell", Magics.CELL)):
            prefix = "%" if kind == "line" else "%%"
            for name in names:
                doc = getattr(Magics, f"{kind}_{name}").__doc__ or ""
                section = _section(self, f"{prefix}{name}", f"{kind}-{name}")
                section += nodes.literal_block(text=" ".join(doc.split()))
                found.append(section)
        return found


class Course(SphinxDirective):
    """The course notebooks, by the title of each one's first cell."""

    def run(self) -> list[nodes.Node]:
        items = nodes.enumerated_list()
        for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
            cells = json.loads(path.read_text())["cells"]
            first = "".join(cells[0]["source"]).strip().splitlines()[0].lstrip("# ").strip()
            item = nodes.list_item()
            item += nodes.paragraph(text=f"{first} ({path.name})")
            items += item
        return [items]


class CompilerSteps(SphinxDirective):
    """The compiler's steps after lowering, in order, each with its purpose."""

    def run(self) -> list[nodes.Node]:
        rows = stage_purposes()
        table = nodes.table()
        group = nodes.tgroup(cols=2)
        table += group
        group += nodes.colspec(colwidth=1)
        group += nodes.colspec(colwidth=4)
        body = nodes.tbody()
        for name, purpose in rows:
            row = nodes.row()
            for text, literal in ((name.strip(), True), (purpose, False)):
                entry = nodes.entry()
                paragraph = nodes.paragraph()
                # A fixpoint's own steps are indented under it.
                prefix = "↳ " if literal and name.startswith(" ") else ""
                paragraph += nodes.literal(text=text) if literal else nodes.Text(text)
                if prefix:
                    paragraph.insert(0, nodes.Text(prefix))
                entry += paragraph
                row += entry
            body += row
        group += body
        return [table]


def setup(app) -> dict:
    app.add_directive("fcl-command-line", CommandLine)
    app.add_directive("fcl-magics", KernelMagics)
    app.add_directive("fcl-course", Course)
    app.add_directive("fcl-steps", CompilerSteps)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
